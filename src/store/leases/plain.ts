/**
 * Leases without an idempotency key: one conditional update per request (writes.ts), its
 * condition the plan's rule. A refusal carries the row it found (ALL_OLD), so telling who
 * holds the unit takes no second read.
 */
import { Contention } from '../../domain/errors.ts';
import { type LeasePlanner, refused } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { TtlCache } from '../../lib/ttl-cache.ts';
import { toLease } from '../../table/codec.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, rowAfter, write } from '../write.ts';
import { leaseUpdate, type Unit } from './writes.ts';

/** Units whose last token is remembered; past it the unit remembered longest ago is forgotten (its next acquire may take two writes). */
const MAX_REMEMBERED_UNITS = 10_000;
/** How long a unit's last token picks the acquire's case: a stale guess costs one more write, never a wrong token. */
const REMEMBER_TOKEN_MS = 10 * 60_000;
/** Updates tried before giving up (each failure but the last is an acquire's case guessed wrong, or a row that changed meanwhile). */
const MAX_ATTEMPTS = 4;

export function createPlainLeases(deps: StoreDeps, read: (tenant: string, unitId: string) => Promise<Lease | null>) {
  const { tableName, now } = deps;
  /** The last token seen per unit: the next acquire's guess of which case applies (one write, not two). */
  const lastTokens = new TtlCache<string, number>({ max: MAX_REMEMBERED_UNITS, ttlMs: REMEMBER_TOKEN_MS, now: () => now().getTime() });
  const remember = (unitKey: string, token: number | undefined) =>
    token === undefined ? lastTokens.delete(unitKey) : lastTokens.set(unitKey, token);

  /** The lease the plan's update left; its refusal when the row does not meet the rule. */
  return async function plain(unit: Unit, planner: LeasePlanner): Promise<Lease> {
    const at = now().getTime();
    const unitKey = `${unit.tenant}\u0000${unit.unitId}`;
    let plan = planner(at, lastTokens.get(unitKey));
    // No waiting between tries: a refusal brings the row as it is now, and the next try is planned on it.
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      try {
        const lease = toLease(
          rowAfter(
            await write(deps, [leaseUpdate(tableName, unit.tenant, plan)], undefined, { operation: 'lease' }),
            `the ${plan.operation} of unit ${unit.unitId}`,
          ),
        );
        remember(unitKey, lease.token);
        return lease;
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        // No row came back (there was none): an acquire reads it, as one may have been made since, and its case follows its token.
        const found = err.item ? toLease(err.item) : plan.fits ? await read(unit.tenant, unit.unitId) : null;
        remember(unitKey, found?.token);
        const refusal = refused(plan, found);
        if (refusal) throw refusal;
        plan = planner(at, found?.token);
      }
    }
    throw new Contention(`the lease of unit ${unit.unitId} kept changing under this ${plan.operation}; retry`);
  };
}
