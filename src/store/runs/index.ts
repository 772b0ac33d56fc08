/** Runs: created with their budget in one transaction, read with budget and first events in one Query. */
import type { Run } from '../../domain/run.ts';
import { stored, storedResult } from '../../table/stored-results.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { type ApprovalStep, createApprovals } from './approval.ts';
import { type CancelRun, type ClaimRun, createClaims, type HolderCommand } from './claims.ts';
import { type CreateRun, createRun, type RunCreated } from './create.ts';
import { createEventExpiry } from './finish.ts';
import { createHeadReads } from './heads.ts';
import { createRunReads, type SnapshotOptions } from './read.ts';
import { createSteps } from './step.ts';
import { type Transition, transitionRun } from './transition.ts';

export type { ApprovalResult, ApprovalStep } from './approval.ts';
export type { CancelRun, Claimed, ClaimRun, HolderCommand, RunStepped } from './claims.ts';
export type { CreateRun, RunCreated } from './create.ts';
export type { RunSnapshot } from './read.ts';
export type { Transition } from './transition.ts';

/** Dates come back from an idempotency record as strings. */

/** What runs need of the event store: where a run's events end, and over how many shards they are spread. */
export interface EventLayout {
  lastSeq: (tenant: string, runId: string, shards?: number) => Promise<number>;
  shardsOf: (tenant: string, runId: string) => Promise<number>;
  knownShards: (tenant: string, runId: string) => number | undefined;
  /** Remembers the shard count of a run just read, which exists. */
  rememberShards: (tenant: string, runId: string, shards: number) => void;
  /** Runs a server step with the run to itself among this process's appends. */
  alone: <T>(tenant: string, runId: string, step: () => Promise<T>) => Promise<T>;
}

export function createRunStore(deps: StoreDeps, idempotency: Idempotency, layout: EventLayout) {
  const { lastSeq } = layout;
  const reads = createRunReads(deps, layout);
  const heads = createHeadReads(deps);
  const expiry = createEventExpiry(deps, layout);
  const transitionOnce = (input: Transition, claim?: Parameters<typeof transitionRun>[4]) =>
    transitionRun(deps, reads, (expires) => expiry.start(input.tenant, input.runId, expires), input, claim);
  const steps = createSteps(deps, reads, lastSeq, expiry.start, layout.alone);
  const approvals = createApprovals(deps, { idempotency, steps });
  const claims = createClaims(deps, { idempotency, steps });

  return {
    /**
     * An approval step: the status change and its event in one transaction.
     * @throws StatusConflict, RunNotFound, IdempotencyConflict
     */
    decide: (input: ApprovalStep, idem?: IdempotencyKey) => approvals.decide(input, idem),

    /** Takes the run for a worker (a STALLED one is taken over). @throws RunHeld, RunNotFound, StatusConflict, IdempotencyConflict */
    claim: (input: ClaimRun, idem?: IdempotencyKey) => claims.claim(input, idem),
    /** @throws ClaimLost */
    renewClaim: (input: HolderCommand & { ttlSeconds: number }) => claims.renew(input),
    /** @throws ClaimLost */
    releaseClaim: (input: HolderCommand) => claims.release(input),
    /** Any unfinished run to CANCELLED, its claim ended. @throws StatusConflict, RunNotFound, IdempotencyConflict */
    cancel: (input: CancelRun, idem?: IdempotencyKey) => claims.cancel(input, idem),
    /** The stall watcher's step on a run whose claim ran out (undefined: nothing to do). */
    stall: claims.stall,
    /** Claims that ran out, from the stall index. */
    expiredClaims: claims.expired,
    /** A claim of a finished or vanished run, out of the stall index. */
    unlistClaim: claims.unlist,
    /** The expired claim of a run that cannot stall now, out of the stall index while the run is still in that status. */
    unlistClaimWhile: claims.unlistWhile,
    /** The run's metadata and claim, strongly consistent (undefined: no such run). */
    head: steps.head,
    /** The run's budget and claim rows, read together with the other runs a reader asks for in the same turn. */
    headRows: heads.headRows,
    /** The budget and claim rows of many runs (a listing's page), in BatchGetItem requests of 100 keys. */
    headsOf: heads.headsOf,

    /** Resolves once finished runs' events have all been given their TTL (tests, shutdown). */
    settled: expiry.settled,

    /**
     * Creates the run's metadata and budget together, or neither.
     * @throws RunAlreadyExists
     * @throws IdempotencyConflict when the key was used for a different request
     */
    async create(input: CreateRun, idem?: IdempotencyKey): Promise<RunCreated> {
      if (!idem) return createRun(deps, input);
      return idempotency.once<RunCreated>(idem, {
        perform: (claim) => createRun(deps, input, claim),
        encode: (created) => created,
        decode: storedResult<RunCreated>,
      });
    },

    /** Metadata, budget and up to `eventLimit` first events, from ONE Query; null when the run does not exist. */
    read: (tenant: string, runId: string, options: SnapshotOptions) => reads.snapshot(tenant, runId, options),

    /**
     * Moves the run from `from` to `to` (the caller checked the transition is legal). A run
     * reaching a terminal status gets its TTL: it expires after the finished-run retention.
     * @throws StatusConflict when the run is no longer in `from` (or not at expectedVersion)
     * @throws RunNotFound
     */
    async transition(input: Transition, idem?: IdempotencyKey): Promise<Run> {
      // A terminal transition is a transaction (metadata and budget): the run is read after it.
      if (!idem) return (await transitionOnce(input)) ?? reads.current(input.tenant, input.runId);
      return idempotency.once(idem, {
        perform: (claim) => transitionOnce(input, claim()),
        readResult: () => reads.current(input.tenant, input.runId),
        encode: (run) => run,
        decode: stored.run,
      });
    },
  };
}

export type RunStore = ReturnType<typeof createRunStore>;
