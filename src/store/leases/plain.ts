/**
 * Leases without an idempotency key: one conditional update per request, its condition
 * keeping the lease rules in DynamoDB. A refusal carries the row it found (ALL_OLD), so
 * telling who holds the unit takes no second read.
 */
import { Contention, LeaseHeld, LeaseLost } from '../../domain/errors.ts';
import { acquireCase, heldByOther } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { TtlCache } from '../../lib/ttl-cache.ts';
import { toLease } from '../../table/codec.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, rowAfter, type Write, write } from '../write.ts';
import type { AcquireLease, ReleaseLease, RenewLease } from './index.ts';
import { acquireUpdate, holderUpdate } from './writes.ts';

/** Units whose last token is remembered; past it the unit remembered longest ago is forgotten (its next acquire may take two writes). */
const MAX_REMEMBERED_UNITS = 10_000;
/** How long a unit's last token picks the acquire's case: a stale guess costs one more write, never a wrong token. */
const REMEMBER_TOKEN_MS = 10 * 60_000;
/** Acquire updates tried before giving up (each failure but the last is a row that changed meanwhile). */
const MAX_ACQUIRE_ATTEMPTS = 4;

export function createPlainLeases(deps: StoreDeps, read: (tenant: string, unitId: string) => Promise<Lease | null>) {
  const { tableName, now, retention } = deps;
  /** The last token seen per unit: the next acquire's guess of which update applies (one write, not two). */
  const lastTokens = new TtlCache<string, number>({ max: MAX_REMEMBERED_UNITS, ttlMs: REMEMBER_TOKEN_MS, now: () => now().getTime() });
  const remember = (unitKey: string, token: number | undefined) =>
    token === undefined ? lastTokens.delete(unitKey) : lastTokens.set(unitKey, token);
  const update = async (what: string, change: Write) => toLease(rowAfter(await write(deps, [change]), what));

  async function acquire(input: AcquireLease): Promise<Lease> {
    const at = now().getTime();
    const until = at + input.ttlSeconds * 1000;
    const unitKey = `${input.tenant}\u0000${input.unitId}`;
    let how = acquireCase(lastTokens.get(unitKey), at, until, retention.leaseSeconds);
    // No waiting between tries: a refusal brings the row as it is now, and the next try is decided on it.
    for (let attempt = 0; attempt < MAX_ACQUIRE_ATTEMPTS; attempt++) {
      try {
        const lease = await update(`acquiring unit ${input.unitId}`, acquireUpdate(tableName, input, at, how, retention.leaseSeconds));
        remember(unitKey, lease.token);
        return lease;
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        const found = err.item ? toLease(err.item) : await read(input.tenant, input.unitId);
        remember(unitKey, found?.token);
        const held = heldByOther(found, input.owner, at);
        if (held) throw new LeaseHeld(held);
        // Not held: the row's token was in another case than guessed (or changed meanwhile).
        how = acquireCase(found?.token, at, until, retention.leaseSeconds);
      }
    }
    throw new Contention(`the lease of unit ${input.unitId} kept changing under this acquire; retry`);
  }

  /** The holder's lease now ends at `untilMs`; LeaseLost with the row found otherwise. */
  async function holderWrite(input: ReleaseLease, untilMs: number, at: number, mustBeLive: boolean) {
    try {
      return await update(
        `updating the lease of unit ${input.unitId}`,
        holderUpdate(tableName, input, untilMs, at, mustBeLive, retention.leaseSeconds),
      );
    } catch (err) {
      if (!(err instanceof ConditionFailed)) throw err;
      throw new LeaseLost(input.unitId, err.item ? toLease(err.item) : null, new Date(at));
    }
  }

  return {
    acquire,
    renew(input: RenewLease) {
      const at = now().getTime();
      return holderWrite(input, at + input.ttlSeconds * 1000, at, true);
    },
    release(input: ReleaseLease) {
      const at = now().getTime();
      return holderWrite(input, at, at, false);
    },
  };
}
