/**
 * What a DynamoDB failure means for whoever asked: the kinds that retrying later may cure.
 * The one place that reads the SDK's error names and codes for this.
 */
import { cancellations, isTransactionCanceled } from './conditions.ts';

export type Availability = 'throttled' | 'conflict' | 'unreachable';

const THROTTLED = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'LimitExceededException',
]);
/** A transaction's cancellation reason for an action whose partition was past its throughput (on-demand, provisioned). */
const THROTTLED_ACTIONS = new Set(['ThrottlingError', 'ProvisionedThroughputExceeded']);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ECONNABORTED']);

/** Another transaction held the item at that moment: nothing was applied, and trying again is safe. */
export function isTransactionConflict(err: unknown) {
  if ((err as Error)?.name === 'TransactionConflictException') return true;
  if (!isTransactionCanceled(err)) return false;
  const reasons = cancellations(err);
  return reasons.some((r) => r.code === 'TransactionConflict') && !reasons.some((r) => r.conditionFailed);
}

/**
 * The request was refused for throughput (a partition past its units, named in the error's
 * ThrottlingReasons, or the table's): nothing was applied, and trying again a little later is
 * safe. A transaction says so per action, in its cancellation reasons.
 */
export function isThrottle(err: unknown) {
  if (THROTTLED.has((err as Error)?.name)) return true;
  if (!isTransactionCanceled(err)) return false;
  const reasons = cancellations(err);
  return reasons.some((r) => THROTTLED_ACTIONS.has(r.code)) && !reasons.some((r) => r.conditionFailed);
}

/**
 * A throttle on the request's only attempt: proof that nothing of it was applied. After the
 * SDK's own retries a throttle proves that of the last attempt only (an earlier one that timed
 * out may have landed), so whoever writes the request again as a new one (new seqs, a new
 * transaction token) must see the first kind.
 */
export function isUnappliedThrottle(err: unknown) {
  return isThrottle(err) && ((err as { $metadata?: { attempts?: number } })?.$metadata?.attempts ?? 1) <= 1;
}

/** The kind of a failure that retrying later may cure, or undefined for any other. */
export function availabilityOf(err: unknown): Availability | undefined {
  const e = err as Error & { code?: string; $metadata?: { httpStatusCode?: number } };
  if (isThrottle(err)) return 'throttled';
  if (isTransactionConflict(err)) return 'conflict';
  if (
    UNREACHABLE.has(e?.code ?? '') ||
    e?.name === 'TimeoutError' ||
    e?.name === 'RequestTimeout' ||
    (e?.$metadata?.httpStatusCode ?? 0) >= 500
  ) {
    return 'unreachable';
  }
  return undefined;
}
