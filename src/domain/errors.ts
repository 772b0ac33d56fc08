/**
 * Expected refusals: a conditional write that did not hold. Each carries what a client
 * needs to decide its next step without another read.
 */
import type { Budget, Lease, RunClaim, RunStatus } from './run.ts';

export abstract class DomainError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class RunNotFound extends DomainError {
  constructor(readonly runId: string) {
    super(`run ${runId} does not exist`);
  }
}

export class RunAlreadyExists extends DomainError {
  constructor(readonly runId: string) {
    super(`run ${runId} already exists`);
  }
}

export class SequenceConflict extends DomainError {
  constructor(
    readonly runId: string,
    readonly seq: number,
    /** The run's last seq now: the next append goes at lastSeq + 1. */
    readonly lastSeq: number,
  ) {
    super(
      seq <= lastSeq
        ? `seq ${seq} of run ${runId} is taken; the last seq is ${lastSeq}`
        : `seq ${seq} of run ${runId} would leave a gap; the last seq is ${lastSeq}, so the next is ${lastSeq + 1}`,
    );
  }
}

export class BudgetExceeded extends DomainError {
  readonly runId: string;
  readonly cap: number;
  readonly spent: number;
  readonly remaining: number;

  constructor(
    budget: Budget,
    /** The amount that was refused. */
    readonly requested: number,
  ) {
    super(`charging ${requested} would exceed the budget of run ${budget.runId}: ${budget.remaining} of ${budget.cap} remaining`);
    this.runId = budget.runId;
    this.cap = budget.cap;
    this.spent = budget.spent;
    this.remaining = budget.remaining;
  }
}

export class StatusConflict extends DomainError {
  constructor(
    readonly runId: string,
    readonly expected: RunStatus,
    readonly current: RunStatus,
    readonly currentVersion: number,
    /** The version the caller expected, when it gave one. */
    readonly expectedVersion?: number,
    /** What the caller needed, when it is not one status (`unfinished`: any but a terminal one). */
    needed?: string,
  ) {
    super(
      needed
        ? `run ${runId} is ${current}, not ${needed}`
        : current !== expected
          ? `run ${runId} is ${current}, not ${expected}`
          : `run ${runId} is at version ${currentVersion}, not ${expectedVersion}`,
    );
  }
}

export class LeaseHeld extends DomainError {
  readonly unitId: string;
  readonly holder: string;
  readonly expiresAt: Date;

  constructor(lease: Lease) {
    super(`unit ${lease.unitId} is held by ${lease.owner} until ${lease.expiresAt.toISOString()}`);
    this.unitId = lease.unitId;
    this.holder = lease.owner;
    this.expiresAt = lease.expiresAt;
  }
}

export class LeaseLost extends DomainError {
  readonly unitId: string;
  /** Who holds the unit now (absent when nobody does). */
  readonly holder?: string;
  readonly token?: number;

  /** @param live the unit's live lease now (null: nobody holds it) */
  constructor(unitId: string, live: Lease | null) {
    super(
      live
        ? `the lease on unit ${unitId} is now held by ${live.owner} with token ${live.token}`
        : `the lease on unit ${unitId} is no longer yours (it expired or was released)`,
    );
    this.unitId = unitId;
    this.holder = live?.owner;
    this.token = live?.token;
  }
}

export class RunHeld extends DomainError {
  readonly runId: string;
  readonly holder: string;
  readonly expiresAt: Date;

  constructor(claim: RunClaim) {
    super(`run ${claim.runId} is claimed by ${claim.holder} until ${claim.expiresAt.toISOString()}`);
    this.runId = claim.runId;
    this.holder = claim.holder;
    this.expiresAt = claim.expiresAt;
  }
}

/** Why a claim a write was fenced by is not the run's live one. */
export const claimLostReasons = ['EXPIRED', 'RELEASED', 'TAKEN_OVER', 'CANCELLED', 'FINISHED'] as const;
export type ClaimLostReason = (typeof claimLostReasons)[number];

const REASON_TEXT: Record<ClaimLostReason, string> = {
  EXPIRED: 'ran out before it was renewed',
  RELEASED: 'was released',
  TAKEN_OVER: 'was taken over by a newer claim',
  CANCELLED: 'ended when the run was cancelled',
  FINISHED: 'ended when the run finished',
};

/**
 * Why the claim of `token` (the caller's) is lost, from the run's claim row now: a row of another
 * token was taken after it; its own row says how it ended, or that it ran out.
 */
export function claimLostReason(current: RunClaim | null, token: number | undefined, at: number): ClaimLostReason {
  // No claim at all (never claimed, or no such run): none is live, as when one ran out.
  if (!current) return 'EXPIRED';
  const live = !current.ended && current.expiresAt.getTime() > at;
  if ((token !== undefined && current.token !== token) || live) return 'TAKEN_OVER';
  if (current.endedBy === 'RELEASED' || current.endedBy === 'CANCELLED' || current.endedBy === 'FINISHED') return current.endedBy;
  return 'EXPIRED';
}

/** The caller's claim (or the fencing token it wrote with) is not the run's live claim: nothing was written. */
export class ClaimLost extends DomainError {
  readonly runId: string;
  /** Who holds the run now, and with which token (absent when nobody does). */
  readonly holder?: string;
  readonly token?: number;
  readonly reason: ClaimLostReason;

  /** `token`: the one the caller wrote or renewed with. */
  constructor(runId: string, current: RunClaim | null, at: number, token?: number) {
    const live = current && !current.ended && current.expiresAt.getTime() > at ? current : null;
    const reason = claimLostReason(current, token, at);
    super(
      !current
        ? `run ${runId} has no claim (it was never claimed, or the run does not exist): nothing was written`
        : live
          ? `the claim on run ${runId} ${REASON_TEXT[reason]}: it is now ${live.holder}'s, with token ${live.token}; nothing was written`
          : `the claim on run ${runId}${token === undefined ? '' : ` with token ${token}`} ${REASON_TEXT[reason]}: nothing was written`,
    );
    this.runId = runId;
    this.holder = live?.holder;
    this.token = live?.token;
    this.reason = reason;
  }
}

/** An output write at an offset the stream does not continue from (taken by other text, past its end, or after it closed). */
export class OffsetConflict extends DomainError {
  constructor(
    readonly runId: string,
    readonly stream: string,
    /** The stream's length now (code points): the next write goes at this offset. */
    readonly length: number,
    why: 'taken' | 'gap' | 'final',
    offset: number,
  ) {
    super(
      why === 'final'
        ? `output stream ${stream} of run ${runId} is final (${length} code points): nothing more can be written`
        : why === 'gap'
          ? `offset ${offset} of output stream ${stream} of run ${runId} would leave a gap: the stream is ${length} code points long, so the next write goes at ${length}`
          : `offset ${offset} of output stream ${stream} of run ${runId} holds other text: the stream is ${length} code points long`,
    );
  }
}

/** An output write that would make its stream longer than the cap (RUNPLANE_MAX_OUTPUT_LENGTH). */
export class OutputTooLong extends DomainError {
  constructor(
    readonly stream: string,
    readonly limit: number,
  ) {
    super(`output stream ${stream} may hold at most ${limit} code points (RUNPLANE_MAX_OUTPUT_LENGTH): nothing was written`);
  }
}

/** Output waits to be stored past what the server holds (DynamoDB is not taking it): retry once it drains. */
export class OutputBacklog extends DomainError {
  constructor(
    readonly stream: string,
    /** Whose share is full: the stream's, the tenant's, or the server's. */
    readonly full: 'stream' | 'tenant' | 'server' = 'server',
  ) {
    super(
      full === 'tenant'
        ? `output stream ${stream}: this tenant has more output waiting to be stored than its share of the server; retry in a moment`
        : `output stream ${stream} has more text waiting to be stored than the server holds; retry in a moment`,
    );
  }
}

/** A run has as many output streams as one run may (RUNPLANE_MAX_OUTPUT_STREAMS): a new stream is refused. */
export class OutputStreamLimit extends DomainError {
  constructor(
    readonly stream: string,
    readonly limit: number,
  ) {
    super(
      `output stream ${stream}: the run has ${limit} output streams, as many as a run may have (RUNPLANE_MAX_OUTPUT_STREAMS); nothing was written`,
    );
  }
}

/** A tenant has more table reads waiting than the server holds for one tenant: retry in a moment. */
export class ReadsWaiting extends DomainError {
  constructor(readonly limit: number) {
    super(`this tenant has ${limit} table reads waiting already (its share of the server's reads in flight is taken); retry in a moment`);
  }
}

/** A request would read the table more often than one request may (RUNPLANE_MAX_REQUEST_READS). */
export class TooManyReads extends DomainError {
  constructor(readonly limit: number) {
    super(
      `The request would read the table more than ${limit} times (RUNPLANE_MAX_REQUEST_READS): ask for smaller pages (first/last) or fewer fields`,
    );
  }
}

export class IdempotencyConflict extends DomainError {
  constructor(
    readonly key: string,
    /** The operation the key was first used for. */
    readonly operation: string,
  ) {
    super(`idempotency key ${key} was already used for a different request (${operation}); use a new key for a new request`);
  }
}

/** Input that only DynamoDB could judge (an item too large once stored): a client error, naming the field. */
export class InvalidInput extends Error {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`Invalid input: ${field}: ${problem}`);
  }
}

/** Too many writers collided for too long; the caller may retry. */
export class Contention extends Error {}

/** Appends to one run collided for too long. */
export class ContentionExceeded extends Contention {
  constructor(readonly runId: string) {
    super(`appending to run ${runId} kept colliding with other writers; retry`);
  }
}

/** A tenant-wide subscriber stopped reading while more things changed than its feed may hold. */
export class FellBehind extends Error {
  constructor(
    readonly what: string,
    readonly limit: number,
  ) {
    super(`This subscriber fell behind: more than ${limit} ${what} changed while it was not reading; list them again and resubscribe`);
  }
}

/** Changes may have been lost upstream (a trimmed stream): a tenant-wide feed cannot re-read them all. */
export class ChangesLost extends Error {
  constructor(what: string) {
    super(`Changes of ${what} may have been lost (the table's stream was trimmed or replaced); list them again and resubscribe`);
  }
}
