/** An idempotency record holds its first answer as JSON: here it is read back, kind by kind. */
import type { Budget, Lease, Run, RunClaim, RunEvent } from '../domain/run.ts';

const storedDate = (value: unknown) => new Date(value as string);

/**
 * Values an idempotency record kept as JSON, read back into domain values (their dates were
 * written as ISO strings): a retry gets the first answer as the first request got it.
 */
export const stored = {
  run: (value: unknown): Run => {
    const run = value as Run;
    // Stored before runs had event shards: the seed's layout.
    return { ...run, createdAt: storedDate(run.createdAt), updatedAt: storedDate(run.updatedAt), eventShards: run.eventShards ?? 1 };
  },
  event: (value: unknown): RunEvent => {
    const event = value as RunEvent;
    return { ...event, createdAt: storedDate(event.createdAt) };
  },
  claim: (value: unknown): RunClaim => {
    const claim = value as RunClaim;
    return { ...claim, acquiredAt: storedDate(claim.acquiredAt), expiresAt: storedDate(claim.expiresAt) };
  },
  lease: (value: unknown): Lease => {
    const lease = value as Lease;
    return { ...lease, acquiredAt: storedDate(lease.acquiredAt), expiresAt: storedDate(lease.expiresAt) };
  },
  budget: (value: unknown): Budget => value as Budget,
};

type StoredKind = keyof typeof stored;
const isStoredKind = (key: string): key is StoredKind => Object.hasOwn(stored, key);

/**
 * A stored result made of such values under their kinds' names (`{ run, event, claim }`): each
 * read back as its kind, absent and null ones left so.
 */
export function storedResult<T extends Partial<Record<StoredKind, unknown>>>(value: unknown): T {
  const result: Record<string, unknown> = { ...(value as object) };
  for (const [key, field] of Object.entries(result)) if (isStoredKind(key) && field != null) result[key] = stored[key](field);
  return result as T;
}
