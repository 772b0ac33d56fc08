/**
 * withRun: work on a run while holding its claim. Claims it (waiting while another worker's
 * claim is live, up to `waitMs`), renews in the background well before expiry, hands the
 * function a run whose writes carry the claim's fencing token by themselves, aborts the
 * function's signal the moment the run is cancelled, the claim is taken over or lost, or a
 * renewal cannot get through before it would expire, and releases at the end, also when the
 * function throws. A worker that was cancelled or superseded cannot write to the run any more:
 * the server refuses its token (ClaimLost), whatever the worker still believes.
 */
import { clientCodes, RunplaneError } from './errors.ts';
import type { Json } from './graphql.ts';
import type {
  AppendEventInput,
  AppendEventResult,
  CallOptions,
  ChargeBudgetResult,
  ClaimRunResult,
  Mutations,
  RequestApprovalResult,
  TransitionRunInput,
  TransitionRunResult,
} from './mutations.ts';
import type { OutputWriter, OutputWriterOptions } from './output.ts';
import { sleep } from './retry.ts';
import { anySignal } from './signals.ts';
import type { RunState } from './state-streams.ts';

export interface RunClaimOptions {
  runId: string;
  /** Who holds it (a worker id). */
  holder: string;
  /** How long the claim lasts unless renewed (1 to 604800): a worker that dies is found stalled this long after. */
  ttlSeconds: number;
  /** How long to wait for another worker's claim to end before giving up (RUN_HELD). Default 0: one try. */
  waitMs?: number;
  /** Abandons the wait, and aborts the function's signal. */
  signal?: AbortSignal;
}

export type RunClaimState = Extract<ClaimRunResult, { __typename: 'RunClaim' }>;

/** The run as the function holding its claim writes to it: every write fenced by the claim's token. */
export interface ClaimedRun {
  id: string;
  /** The claim: its `token` goes with every write below (and to any resource of your own). */
  claim: RunClaimState;
  append(input: Omit<AppendEventInput, 'runId' | 'fencingToken'>, options?: CallOptions): Promise<AppendEventResult>;
  charge(amount: number, options?: CallOptions & { idempotencyKey?: string }): Promise<ChargeBudgetResult>;
  transition(input: Omit<TransitionRunInput, 'runId' | 'fencingToken'>, options?: CallOptions): Promise<TransitionRunResult>;
  requestApproval(request: Json, options?: CallOptions & { idempotencyKey?: string }): Promise<RequestApprovalResult>;
  /** A writer of one of the run's output streams, its text fenced by the claim's token. */
  output(stream: string, options?: Omit<OutputWriterOptions, 'fencingToken'>): OutputWriter;
}

export interface RunClaimDeps {
  mutations: Mutations;
  /** The run's states as they change (runChanged): how a cancellation or takeover reaches the worker. */
  runChanged(runId: string, options: { signal: AbortSignal }): AsyncIterable<RunState>;
  output(runId: string, stream: string, options: OutputWriterOptions): OutputWriter;
}

/** Polling a held run: from this delay, doubling, never past the cap (nor past the claim's end). */
const WAIT = { firstMs: 50, maxMs: 500 };
/** Renewals every third of the TTL: two can fail before the claim runs out. */
const RENEWALS_PER_TTL = 3;
/** The signal aborts this fraction of the TTL before the claim could run out: time for the function to stop. */
const SAFETY_FRACTION = 0.1;

export async function withRun<T>(
  deps: RunClaimDeps,
  options: RunClaimOptions,
  fn: (run: ClaimedRun, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { mutations } = deps;
  const { claim, sentAt } = await take(mutations, options);
  const held = hold(deps, options, claim, sentAt);
  const token = claim.token;
  const runId = options.runId;
  const run: ClaimedRun = {
    id: runId,
    claim,
    append: (input, call) => mutations.appendEvent({ ...input, runId, fencingToken: token }, call),
    charge: (amount, { idempotencyKey, ...call } = {}) =>
      mutations.chargeBudget({ runId, amount, fencingToken: token, idempotencyKey }, call),
    transition: (input, call) => mutations.transitionRun({ ...input, runId, fencingToken: token }, call),
    output: (stream, writerOptions) => deps.output(runId, stream, { ...writerOptions, fencingToken: token }),
    requestApproval: (request, { idempotencyKey, ...call } = {}) =>
      mutations.requestApproval({ runId, request, fencingToken: token, idempotencyKey }, call),
  };
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    outcome = { ok: true, value: await fn(run, held.signal) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  await held.stop();
  // Also after a loss: if the claim is still ours (a renewal was only slow), the run is free at once.
  if (!held.ended)
    await mutations.releaseRunClaim({ runId, holder: options.holder, token }, { retry: { maxAttempts: 3 } }).catch(() => undefined);
  if (held.lost)
    throw new RunplaneError(held.lost.code, held.lost.message, {
      details: held.lost.details,
      cause: outcome.ok ? undefined : outcome.error,
    });
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

async function take(mutations: Mutations, { runId, holder, ttlSeconds, waitMs = 0, signal }: RunClaimOptions) {
  const giveUpAt = Date.now() + waitMs;
  for (let tries = 0; ; tries++) {
    const sentAt = Date.now();
    const answer = await mutations.claimRun({ runId, holder, ttlSeconds }, { signal });
    if (answer.__typename === 'RunClaim') return { claim: answer, sentAt };
    if (answer.__typename !== 'RunHeld') {
      const code = answer.__typename === 'RunNotFound' ? 'NOT_FOUND' : answer.__typename === 'StatusConflict' ? 'CONFLICT' : 'BAD_REQUEST';
      throw new RunplaneError(code, answer.message, { retryable: false, details: { runId, refusal: answer.__typename } });
    }
    const untilExpiry = Date.parse(answer.expiresAt) - Date.now();
    const delay = Math.max(10, Math.min(untilExpiry, Math.random() * Math.min(WAIT.maxMs, WAIT.firstMs * 2 ** tries)));
    if (Date.now() + delay > giveUpAt) {
      throw new RunplaneError(clientCodes.runHeld, `run ${runId} is held by ${answer.holder} until ${answer.expiresAt}`, {
        details: { runId, holder: answer.holder, expiresAt: answer.expiresAt },
      });
    }
    await sleep(delay, signal);
  }
}

/** Keeps the claim: renewals in the background, the run's changes watched, and the signal that says it is over. */
function hold(deps: RunClaimDeps, { runId, holder, ttlSeconds, signal }: RunClaimOptions, claim: RunClaimState, claimedSentAt: number) {
  const ttlMs = ttlSeconds * 1000;
  const aborter = new AbortController();
  const stopping = new AbortController();
  let lost: RunplaneError | undefined;
  /** The claim ended on the server (cancelled, taken over): nothing to release. */
  let ended = false;
  let expiry: ReturnType<typeof setTimeout> | undefined;

  const lose = (error: RunplaneError, over = false) => {
    if (lost || stopping.signal.aborted) return;
    lost = error;
    ended ||= over;
    clearTimeout(expiry);
    aborter.abort(error);
  };
  const claimLost = (message: string, details: Record<string, unknown> = {}) =>
    new RunplaneError(clientCodes.claimLost, message, { retryable: false, details: { runId, ...details } });
  /** The claim is known good until `sentAt` (when the request that extended it was sent) plus the TTL. */
  const confirmed = (sentAt: number) => {
    clearTimeout(expiry);
    const abortAt = sentAt + ttlMs * (1 - SAFETY_FRACTION);
    expiry = setTimeout(
      () => lose(claimLost(`the claim on run ${runId} could not be renewed before it ran out`)),
      Math.max(0, abortAt - Date.now()),
    );
    return abortAt;
  };
  const onCallerAbort = () => aborter.abort(signal?.reason);
  signal?.addEventListener('abort', onCallerAbort, { once: true });

  const renewing = (async () => {
    let validUntil = confirmed(claimedSentAt);
    while (!lost && !stopping.signal.aborted) {
      try {
        await sleep(ttlMs / RENEWALS_PER_TTL, stopping.signal);
        const sentAt = Date.now();
        const until = AbortSignal.timeout(Math.max(1, validUntil - sentAt));
        const answer = await deps.mutations.renewRunClaim(
          { runId, holder, token: claim.token, ttlSeconds },
          { signal: anySignal([stopping.signal, until]), retry: { deadlineMs: Math.max(0, validUntil - sentAt) } },
        );
        if (answer.__typename === 'RunClaim') validUntil = confirmed(sentAt);
        else lose(claimLost(answer.message, { holder: answer.currentHolder, token: answer.currentToken }), true);
      } catch {
        // Stopped, or this renewal failed: the next one tries again, and the expiry timer decides.
      }
    }
  })();

  // What reaches the worker without its asking: a cancellation, or another worker's claim.
  const watching = (async () => {
    try {
      for await (const state of deps.runChanged(runId, { signal: stopping.signal })) {
        if (state.status === 'CANCELLED') {
          lose(new RunplaneError(clientCodes.runCancelled, `run ${runId} was cancelled`, { retryable: false, details: { runId } }), true);
          return;
        }
        if (state.claim && state.claim.token !== claim.token) {
          lose(
            claimLost(`run ${runId} was taken over by ${state.claim.holder}`, { holder: state.claim.holder, token: state.claim.token }),
            true,
          );
          return;
        }
      }
    } catch {
      // The stream gave up (after its own reconnects): renewals still tell whether the claim holds.
    }
  })();

  return {
    signal: aborter.signal,
    get lost() {
      return lost;
    },
    get ended() {
      return ended;
    },
    async stop() {
      stopping.abort();
      clearTimeout(expiry);
      signal?.removeEventListener('abort', onCallerAbort);
      await Promise.all([renewing, watching]);
    },
  };
}
