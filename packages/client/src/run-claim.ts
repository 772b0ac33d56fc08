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
import { askWhileHeld, holdRenewed, whileHeld } from './held.ts';
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

export async function withRun<T>(
  deps: RunClaimDeps,
  options: RunClaimOptions,
  fn: (run: ClaimedRun, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { mutations } = deps;
  const { claim, sentAt } = await take(mutations, options);
  /** The function's own transition to a finished status while it is on its way: the claim ends with it, and that is no loss. */
  const finishing: Finishing = {};
  const held = hold(deps, options, claim, sentAt, finishing);
  const token = claim.token;
  const runId = options.runId;
  const transition: ClaimedRun['transition'] = async (input, call) => {
    if (!FINISHED.has(input.to)) return mutations.transitionRun({ ...input, runId, fencingToken: token }, call);
    let settle!: (finished: boolean) => void;
    finishing.to = input.to;
    finishing.answer = new Promise<boolean>((resolve) => {
      settle = resolve;
    });
    let finished = false;
    try {
      const answer = await mutations.transitionRun({ ...input, runId, fencingToken: token }, call);
      finished = answer.__typename === 'Run' && answer.status === input.to;
      if (finished) held.finished();
      return answer;
    } finally {
      settle(finished);
      finishing.to = undefined;
      finishing.answer = undefined;
    }
  };
  const run: ClaimedRun = {
    id: runId,
    claim,
    append: (input, call) => mutations.appendEvent({ ...input, runId, fencingToken: token }, call),
    charge: (amount, { idempotencyKey, ...call } = {}) =>
      mutations.chargeBudget({ runId, amount, fencingToken: token, idempotencyKey }, call),
    transition,
    output: (stream, writerOptions) => deps.output(runId, stream, { ...writerOptions, fencingToken: token }),
    requestApproval: (request, { idempotencyKey, ...call } = {}) =>
      mutations.requestApproval({ runId, request, fencingToken: token, idempotencyKey }, call),
  };
  return whileHeld(
    held,
    () => fn(run, held.signal),
    // A claim that ended on the server (cancelled, taken over, its run finished) has nothing to release.
    async () => held.ended || mutations.releaseRunClaim({ runId, holder: options.holder, token }, { retry: { maxAttempts: 3 } }),
  );
}

async function take(mutations: Mutations, { runId, holder, ttlSeconds, waitMs, signal }: RunClaimOptions) {
  return askWhileHeld<{ claim: RunClaimState; sentAt: number }>(
    { waitMs, signal },
    async () => {
      const sentAt = Date.now();
      const answer = await mutations.claimRun({ runId, holder, ttlSeconds }, { signal });
      if (answer.__typename === 'RunClaim') return { granted: { claim: answer, sentAt } };
      if (answer.__typename !== 'RunHeld') {
        const code =
          answer.__typename === 'RunNotFound' ? 'NOT_FOUND' : answer.__typename === 'StatusConflict' ? 'CONFLICT' : 'BAD_REQUEST';
        throw new RunplaneError(code, answer.message, { retryable: false, details: { runId, refusal: answer.__typename } });
      }
      return { held: answer };
    },
    ({ holder: heldBy, expiresAt }) =>
      new RunplaneError(clientCodes.runHeld, `run ${runId} is held by ${heldBy} until ${expiresAt}`, {
        details: { runId, holder: heldBy, expiresAt },
      }),
  );
}

/** The statuses a run finishes in: its claim ends with it. */
const FINISHED = new Set<string>(['COMPLETED', 'FAILED', 'CANCELLED']);

/** The function's own finishing transition, while it is on its way: where to, and whether it landed. */
interface Finishing {
  to?: string;
  answer?: Promise<boolean>;
}

/** Keeps the claim: renewals in the background, the run's changes watched, and the signal that says it is over. */
function hold(
  deps: RunClaimDeps,
  { runId, holder, ttlSeconds, signal }: RunClaimOptions,
  claim: RunClaimState,
  claimedSentAt: number,
  finishing: Finishing,
) {
  const claimLost = (message: string, details: Record<string, unknown> = {}) =>
    new RunplaneError(clientCodes.claimLost, message, { retryable: false, details: { runId, ...details } });
  return holdRenewed(
    {
      ttlSeconds,
      signal,
      async renew(call) {
        const answer = await deps.mutations.renewRunClaim({ runId, holder, token: claim.token, ttlSeconds }, call);
        if (answer.__typename === 'RunClaim') return undefined;
        // Perhaps ended by the function's own transition, whose answer is on its way: if that
        // landed, the run is finished and nothing was lost (renewals have stopped meanwhile).
        if (finishing.answer && (await finishing.answer)) return undefined;
        return { error: claimLost(answer.message, { holder: answer.currentHolder, token: answer.currentToken }), ended: true };
      },
      expired: () => claimLost(`the claim on run ${runId} could not be renewed before it ran out`),
      // What reaches the worker without its asking: a cancellation, or another worker's claim.
      async watch(lose, stopping) {
        try {
          for await (const state of deps.runChanged(runId, { signal: stopping })) {
            // The function's own transition, seen before its answer came (not another's cancel).
            if (finishing.to === state.status) continue;
            if (state.status === 'CANCELLED') {
              const error = new RunplaneError(clientCodes.runCancelled, `run ${runId} was cancelled`, {
                retryable: false,
                details: { runId },
              });
              return lose({ error, ended: true });
            }
            if (state.claim && state.claim.token !== claim.token) {
              const { holder: taker, token } = state.claim;
              return lose({ error: claimLost(`run ${runId} was taken over by ${taker}`, { holder: taker, token }), ended: true });
            }
          }
        } catch {
          // The stream gave up (after its own reconnects): renewals still tell whether the claim holds.
        }
      },
    },
    claimedSentAt,
  );
}
