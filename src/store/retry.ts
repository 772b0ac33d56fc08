/**
 * Writes that DynamoDB refused because another transaction held the item at that moment
 * (TransactionConflict) were not applied: trying again is safe, and usually wins at once.
 */
import { isTransactionConflict } from '../table/failures.ts';

const ATTEMPTS = 6;

export async function retryConflicts<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (attempt >= ATTEMPTS || !isTransactionConflict(err)) throw err;
      // Jittered and growing, so that the writers in conflict do not meet again.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * 2 ** attempt));
    }
  }
}
