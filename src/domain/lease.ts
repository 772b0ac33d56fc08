/**
 * Leases as decisions: given the lease row (or none), a command and the clock, the new lease
 * or the refusal. No I/O: the store writes what these decide, conditioned on the row it read.
 *
 * Fencing: every acquire hands out a token larger than every token issued before for the
 * unit. Tokens never fall below the floor, the seconds since TOKEN_EPOCH_MS, so a row that
 * TTL deleted long after its last use restarts above every token it ever gave out.
 */
import { LeaseHeld, LeaseLost } from './errors.ts';
import { TOKEN_EPOCH_MS } from './limits.ts';
import type { Lease } from './run.ts';

export interface AcquireCommand {
  unitId: string;
  owner: string;
  ttlSeconds: number;
}

export interface RenewCommand extends AcquireCommand {
  token: number;
}

export interface ReleaseCommand {
  unitId: string;
  owner: string;
  token: number;
}

export const TOKEN_EPOCH_S = TOKEN_EPOCH_MS / 1000;

/** The smallest token an acquire at `at` (epoch ms) may hand out. */
export const tokenFloor = (at: number) => Math.floor((at - TOKEN_EPOCH_MS) / 1000);

/** The lease, while it has not run out at `at`; null otherwise. */
export const liveAt = (row: Lease | null, at: number) => (row && row.expiresAt.getTime() > at ? row : null);

/** The lease, when someone other than `owner` holds the unit at `at`; null when `owner` may take it. */
export const heldByOther = (row: Lease | null, owner: string, at: number) => {
  const live = liveAt(row, at);
  return live && live.owner !== owner ? live : null;
};

/**
 * When a lease row may be forgotten (epoch seconds): `retentionSeconds` after the lease's end,
 * and never before the floor has passed the row's token, so that a new row's first token
 * (the floor) is still larger than every token the forgotten row gave out.
 */
export const rowExpiry = (untilMs: number, token: number, retentionSeconds: number) =>
  Math.max(Math.floor(untilMs / 1000) + retentionSeconds, TOKEN_EPOCH_S + token + 1);

/** The smallest old token whose successor (old + 1) would outlive the lease's own retention. */
export const aheadFrom = (untilMs: number, retentionSeconds: number) => Math.floor(untilMs / 1000) + retentionSeconds - TOKEN_EPOCH_S - 1;

/**
 * How an acquire moves the token of a row holding `token` (undefined: no row): `floor`, up to
 * the floor; `increment`, by one; `ahead`, by one for a token so far ahead of the clock
 * (acquired many times a second for weeks) that the row's TTL must follow the token rather
 * than the lease.
 */
export type AcquireCase = 'floor' | 'increment' | 'ahead';

export function acquireCase(token: number | undefined, at: number, untilMs: number, retentionSeconds: number): AcquireCase {
  if (token === undefined || token < tokenFloor(at)) return 'floor';
  return token >= aheadFrom(untilMs, retentionSeconds) ? 'ahead' : 'increment';
}

/**
 * Takes the unit if it is free, its lease expired, or `owner` holds it already; the token
 * grows past the row's and never falls below the floor.
 * @throws LeaseHeld while another owner's lease is live
 */
export function acquire(row: Lease | null, { unitId, owner, ttlSeconds }: AcquireCommand, at: number): Lease {
  const held = heldByOther(row, owner, at);
  if (held) throw new LeaseHeld(held);
  const floor = tokenFloor(at);
  return {
    unitId,
    owner,
    token: row ? Math.max(row.token + 1, floor) : floor,
    acquiredAt: new Date(at),
    expiresAt: new Date(at + ttlSeconds * 1000),
    version: (row?.version ?? 0) + 1,
  };
}

/**
 * Extends the holder's live lease to ttlSeconds from `at`.
 * @throws LeaseLost unless `owner` holds it with `token`, and it has not run out
 */
export function renew(row: Lease | null, command: RenewCommand, at: number): Lease {
  const lease = held(row, command, at, true);
  return { ...lease, expiresAt: new Date(at + command.ttlSeconds * 1000), version: lease.version + 1 };
}

/**
 * Ends the holder's lease at `at`: the unit is free at once, the token is kept.
 * @throws LeaseLost unless `owner` holds it with `token`
 */
export function release(row: Lease | null, command: ReleaseCommand, at: number): Lease {
  const lease = held(row, command, at, false);
  return { ...lease, expiresAt: new Date(at), version: lease.version + 1 };
}

/** The holder's own lease; a newer token means someone took over since. */
function held(row: Lease | null, { unitId, owner, token }: ReleaseCommand, at: number, mustBeLive: boolean) {
  if (!row || row.owner !== owner || row.token !== token || (mustBeLive && !liveAt(row, at))) {
    throw new LeaseLost(unitId, row, new Date(at));
  }
  return row;
}
