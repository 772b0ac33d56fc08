/**
 * Leases with an idempotency key: the whole new lease is decided (domain/lease.ts) on the row
 * as read and written only if the row is still that version, so the result is known before
 * the write and stored with the key's claim in the same transaction. (A result read back
 * afterwards could already be a later holder's lease.)
 */
import { Contention } from '../../domain/errors.ts';
import type { Lease } from '../../domain/run.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { ConditionFailed, type TransactItem, write } from '../write.ts';
import { exactUpdate } from './writes.ts';

/** Reads and versioned writes of a keyed request before giving up (each failure is another writer in between). */
const MAX_EXACT_ATTEMPTS = 8;

/** Decides the new lease from the row (null: none) at the clock's `at`, or throws the refusal. */
export type Decide = (row: Lease | null, at: number) => Lease;

interface Unit {
  tenant: string;
  unitId: string;
}

export function createKeyedLeases(
  deps: StoreDeps,
  idempotency: Idempotency,
  read: (tenant: string, unitId: string) => Promise<Lease | null>,
) {
  const { tableName, now, retention } = deps;
  /** Writes what `decide` makes of the row as it is, deciding again whenever another writer came between. */
  async function exactly(unit: Unit, decide: Decide, claim: (lease: Lease) => TransactItem) {
    // No waiting between tries: each one reads the row afresh and decides on it.
    for (let attempt = 0; attempt < MAX_EXACT_ATTEMPTS; attempt++) {
      const row = await read(unit.tenant, unit.unitId);
      const lease = decide(row, now().getTime());
      try {
        await write(deps, [exactUpdate(tableName, unit, row, lease, retention.leaseSeconds)], claim(lease));
        return lease;
      } catch (err) {
        // The row changed since it was read: decide again on the new one.
        if (!(err instanceof ConditionFailed)) throw err;
      }
    }
    throw new Contention(`the lease of unit ${unit.unitId} kept changing under this request; retry`);
  }

  /** The lease `decide` makes, at most once per key; a retry gets the first result back. */
  return (idem: IdempotencyKey, unit: Unit, decide: Decide) =>
    idempotency.once<Lease>(idem, {
      perform: (claim) => exactly(unit, decide, claim),
      encode: (lease) => lease,
      decode: (stored) => {
        const s = stored as Lease & { acquiredAt: string; expiresAt: string };
        return { ...s, acquiredAt: new Date(s.acquiredAt), expiresAt: new Date(s.expiresAt) };
      },
    });
}
