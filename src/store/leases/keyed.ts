/**
 * Leases with an idempotency key: the same update as without one (writes.ts), planned on the
 * row as read and conditioned also on that row's version, beside the key's claim in one
 * transaction. The plan's outcome on the row read is then exactly what the write leaves, so
 * the result is known before the write and stored with the claim. (A result read back
 * afterwards could already be a later owner's lease.)
 */
import { Contention } from '../../domain/errors.ts';
import { type LeasePlanner, outcome } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { stored } from '../../table/stored-results.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { ConditionFailed, type TransactItem, write } from '../write.ts';
import { leaseUpdate, type Unit } from './writes.ts';

/** Reads and versioned writes of a keyed request before giving up (each failure is another writer in between). */
const MAX_EXACT_ATTEMPTS = 8;

export function createKeyedLeases(
  deps: StoreDeps,
  idempotency: Idempotency,
  read: (tenant: string, unitId: string) => Promise<Lease | null>,
) {
  const { tableName, now } = deps;
  /** Writes the plan for the row as it is, planning again whenever another writer came between. */
  async function exactly(unit: Unit, planner: LeasePlanner, claim: (lease: Lease) => TransactItem) {
    // No waiting between tries: each one reads the row afresh and plans on it.
    for (let attempt = 0; attempt < MAX_EXACT_ATTEMPTS; attempt++) {
      const row = await read(unit.tenant, unit.unitId);
      const plan = planner(now().getTime(), row?.token);
      // The condition's own rule, read on the row in hand: a refusal sends no transaction and leaves the key free.
      const lease = outcome(plan, row);
      try {
        await write(deps, [leaseUpdate(tableName, unit.tenant, plan, { seen: row })], claim(lease), { operation: 'lease' });
        return lease;
      } catch (err) {
        // The row changed since it was read: plan again on the new one.
        if (!(err instanceof ConditionFailed)) throw err;
      }
    }
    throw new Contention(`the lease of unit ${unit.unitId} kept changing under this request; retry`);
  }

  /** The lease the plan makes, at most once per key; a retry gets the first result back. */
  return (idem: IdempotencyKey, unit: Unit, planner: LeasePlanner) =>
    idempotency.once<Lease>(idem, {
      perform: (claim) => exactly(unit, planner, claim),
      encode: (lease) => lease,
      decode: stored.lease,
    });
}
