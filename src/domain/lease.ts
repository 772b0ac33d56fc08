/**
 * The lease rules, once: who may acquire, renew or release a unit, when a lease has run out,
 * and how the fencing token moves. Each operation is a plan: the rule the row must meet (facts
 * of domain/lease-facts.ts, joined) and the change it makes. The store writes a plan as one
 * conditional update whose condition is the rule (store/leases/writes.ts says each fact as a
 * condition), with an idempotency key or without; `outcome` reads the same plan on a row in
 * hand. No I/O.
 *
 * Fencing: every acquire hands out a token larger than every token issued before for the
 * unit. Tokens never fall below the floor, the seconds since TOKEN_EPOCH_MS, so a row that
 * TTL deleted long after its last use restarts above every token it ever gave out.
 */
import { type DomainError, LeaseHeld, LeaseLost } from './errors.ts';
import { holds, type LeaseArgs, type LeaseRule } from './lease-facts.ts';
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

/**
 * When a lease row may be forgotten (epoch seconds): `retentionSeconds` after the lease's end,
 * and never before the floor has passed the row's token, so that a new row's first token
 * (the floor) is still larger than every token the forgotten row gave out.
 */
export const rowExpiry = (untilMs: number, token: number, retentionSeconds: number) =>
  Math.max(Math.floor(untilMs / 1000) + retentionSeconds, TOKEN_EPOCH_S + token + 1);

/** The smallest old token whose successor (old + 1) would outlive the lease's own retention. */
export const aheadFrom = (untilMs: number, retentionSeconds: number) => Math.floor(untilMs / 1000) + retentionSeconds - TOKEN_EPOCH_S - 1;

/** Who may acquire: the unit is free, its lease ended, or the caller holds it already. One owner at a time. */
const mayAcquire: LeaseRule = { any: ['free', 'ended', 'mine'] };
/** Who may renew: the owner with its token, while the lease is live (once it ran out, another may have it). */
const mayRenew: LeaseRule = { all: ['present', 'mine', 'sameToken', 'live'] };
/** Who may release: the owner with its token, live or not. */
const mayRelease: LeaseRule = { all: ['present', 'mine', 'sameToken'] };

/** What a write does to the row; every write also adds one to its version. */
export interface LeaseChange {
  /** A new lease (acquire): on which unit, who holds it, since when (epoch ms). Renew and release keep them. */
  taken?: { unitId: string; owner: string; acquiredAt: number };
  /** The lease's end, epoch ms. */
  until: number;
  /** How the fencing token moves: kept, set to the floor, or up by one. */
  token: 'kept' | 'floor' | 'next';
  /** When the row may be forgotten (TTL, epoch seconds), or 'afterToken': once the floor has passed the new token. */
  forgetAt: number | 'afterToken';
}

export interface LeasePlan {
  operation: 'acquire' | 'renew' | 'release';
  unitId: string;
  args: LeaseArgs;
  /** Who may: a row that does not meet it is refused (LeaseHeld, LeaseLost). */
  may: LeaseRule;
  /** An acquire's token case: the rows its move is right for; another row needs another case, not a refusal. */
  fits?: LeaseRule;
  change: LeaseChange;
}

/** A request's plan at the clock `at` (epoch ms), for a row holding `token` (undefined: none, or not known). */
export type LeasePlanner = (at: number, token: number | undefined) => LeasePlan;

/**
 * How an acquire moves the token to max(token + 1, floor). A condition has no max(), so each
 * case is a rule of its own with its own move: `floor`, up to the floor; `increment`, by one;
 * `ahead`, by one for a token so far ahead of the clock (acquired many times a second for
 * weeks) that the row's TTL must follow the token rather than the lease.
 */
export type AcquireCase = 'floor' | 'increment' | 'ahead';

const acquireCases: Record<AcquireCase, { fits: LeaseRule; token: 'floor' | 'next'; forget: 'lease' | 'afterToken' }> = {
  floor: { fits: 'tokenBelowFloor', token: 'floor', forget: 'lease' },
  increment: { fits: { all: ['tokenFromFloor', 'tokenBelowAhead'] }, token: 'next', forget: 'lease' },
  ahead: { fits: 'tokenFromAhead', token: 'next', forget: 'afterToken' },
};

const acquireArgs = (owner: string, at: number, untilMs: number, retentionSeconds: number): LeaseArgs => ({
  owner,
  at,
  floor: tokenFloor(at),
  ahead: aheadFrom(untilMs, retentionSeconds),
});

function caseOf(token: number | undefined, args: LeaseArgs): AcquireCase {
  const row = token === undefined ? null : { token };
  const found = (Object.keys(acquireCases) as AcquireCase[]).find((how) => holds(acquireCases[how].fits, row, args));
  if (!found) throw new Error(`no acquire case fits token ${token}`);
  return found;
}

/** The acquire's case for a row holding `token` (undefined: no row). */
export const acquireCase = (token: number | undefined, at: number, untilMs: number, retentionSeconds: number) =>
  caseOf(token, acquireArgs('', at, untilMs, retentionSeconds));

/**
 * Takes the unit for `owner` at `at`, in the case of a row holding `token` (undefined: none,
 * or not known; a wrong guess is a failed `fits`, planned again on the row found).
 */
export function planAcquire(
  { unitId, owner, ttlSeconds }: AcquireCommand,
  at: number,
  retentionSeconds: number,
  token?: number,
): LeasePlan {
  const until = at + ttlSeconds * 1000;
  const args = acquireArgs(owner, at, until, retentionSeconds);
  const how = acquireCases[caseOf(token, args)];
  return {
    operation: 'acquire',
    unitId,
    args,
    may: mayAcquire,
    fits: how.fits,
    change: {
      taken: { unitId, owner, acquiredAt: at },
      until,
      token: how.token,
      // The floor's and the increment's successor fit within the lease's own retention.
      forgetAt: how.forget === 'lease' ? rowExpiry(until, 0, retentionSeconds) : 'afterToken',
    },
  };
}

/** Extends the owner's live lease to ttlSeconds from `at`. */
export function planRenew({ unitId, owner, token, ttlSeconds }: RenewCommand, at: number, retentionSeconds: number): LeasePlan {
  const until = at + ttlSeconds * 1000;
  return ownerPlan('renew', { unitId, owner, token }, at, until, mayRenew, retentionSeconds);
}

/** Ends the owner's lease at `at`: the unit is free at once, the token is kept. */
export function planRelease(command: ReleaseCommand, at: number, retentionSeconds: number): LeasePlan {
  return ownerPlan('release', command, at, at, mayRelease, retentionSeconds);
}

function ownerPlan(
  operation: 'renew' | 'release',
  { unitId, owner, token }: ReleaseCommand,
  at: number,
  until: number,
  may: LeaseRule,
  retentionSeconds: number,
): LeasePlan {
  return {
    operation,
    unitId,
    args: { owner, token, at, floor: tokenFloor(at) },
    may,
    change: { until, token: 'kept', forgetAt: rowExpiry(until, token, retentionSeconds) },
  };
}

/** The refusal of `plan` by a row that does not meet its `may`. */
function refusal(plan: LeasePlan, row: Lease | null): DomainError {
  if (plan.operation !== 'acquire') return new LeaseLost(plan.unitId, liveAt(row, plan.args.at));
  if (!row) throw new Error(`the acquire of unit ${plan.unitId} was refused by no row`);
  return new LeaseHeld(row);
}

/**
 * The lease `plan` makes of `row`: what its write leaves, known before the write.
 * @throws LeaseHeld or LeaseLost when the row does not meet the plan's rule
 */
export function outcome(plan: LeasePlan, row: Lease | null): Lease {
  if (!holds(plan.may, row, plan.args)) throw refusal(plan, row);
  if (plan.fits && !holds(plan.fits, row, plan.args)) throw new Error(`the acquire of unit ${plan.unitId} was planned for another token`);
  const { taken, until, token } = plan.change;
  const held = taken ?? (row && { unitId: row.unitId, owner: row.owner, acquiredAt: row.acquiredAt.getTime() });
  if (!held) throw new Error(`the ${plan.operation} of unit ${plan.unitId} has no row to keep the owner of`);
  const old = row?.token ?? 0;
  return {
    unitId: held.unitId,
    owner: held.owner,
    token: token === 'floor' ? plan.args.floor : token === 'next' ? old + 1 : old,
    acquiredAt: new Date(held.acquiredAt),
    expiresAt: new Date(until),
    version: (row?.version ?? 0) + 1,
  };
}

/**
 * What a write of `plan` refused by its condition means, given the row it found: the refusal,
 * or null when the row meets the rule but not the plan's token case (another case was guessed,
 * or the row moved on): plan again on `found`.
 */
export function refused(plan: LeasePlan, found: Lease | null): DomainError | null {
  return plan.fits && holds(plan.may, found, plan.args) ? null : refusal(plan, found);
}

const argsAt = (at: number, owner = ''): LeaseArgs => ({ owner, at, floor: tokenFloor(at) });

/** The lease, while it has not run out at `at`; null otherwise. */
export const liveAt = (row: Lease | null, at: number) => (holds('live', row, argsAt(at)) ? row : null);

/** The lease, when the acquire rule refuses `owner` at `at` (someone else holds the unit); null when `owner` may take it. */
export const heldByOther = (row: Lease | null, owner: string, at: number) => (holds(mayAcquire, row, argsAt(at, owner)) ? null : row);

/**
 * Takes the unit if it is free, its lease expired, or `owner` holds it already; the token
 * grows past the row's and never falls below the floor.
 * @throws LeaseHeld while another owner's lease is live
 */
export const acquire = (row: Lease | null, command: AcquireCommand, at: number, retentionSeconds: number) =>
  outcome(planAcquire(command, at, retentionSeconds, row?.token), row);

/**
 * Extends the owner's live lease to ttlSeconds from `at`.
 * @throws LeaseLost unless `owner` holds it with `token`, and it has not run out
 */
export const renew = (row: Lease | null, command: RenewCommand, at: number, retentionSeconds: number) =>
  outcome(planRenew(command, at, retentionSeconds), row);

/**
 * Ends the owner's lease at `at`: the unit is free at once, the token is kept.
 * @throws LeaseLost unless `owner` holds it with `token`
 */
export const release = (row: Lease | null, command: ReleaseCommand, at: number, retentionSeconds: number) =>
  outcome(planRelease(command, at, retentionSeconds), row);
