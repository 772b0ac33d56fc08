/**
 * runChanged and leaseChanged: a run's (or a unit's lease's) state, then its state after each
 * change, across reconnects, never going back to an older version. Only the newest state is
 * held for a slow consumer: a state replaces the one before it.
 */
import type { ResultOf } from './graphql.ts';
import { LeaseChanged, RunChanged } from './operations.ts';
import { resuming } from './resuming.ts';
import type { StreamDeps } from './run-events.ts';

export type RunState = ResultOf<typeof RunChanged>['runChanged'];
export type LeaseState = ResultOf<typeof LeaseChanged>['leaseChanged'];

export interface StateStreamOptions {
  signal?: AbortSignal;
}

/**
 * Of two run states, whether `next` is newer: neither the run's nor its budget's version went
 * back, and one of them, or the claim's, went forward (or the claim ended: a run whose claim
 * is over shows none).
 */
export function isNewerRun(next: RunState, seen: RunState | undefined) {
  if (!seen) return true;
  const forward = next.version >= seen.version && next.budget.version >= seen.budget.version;
  const claimMoved = next.claim ? next.claim.version > (seen.claim?.version ?? 0) : seen.claim !== null;
  return forward && (next.version > seen.version || next.budget.version > seen.budget.version || claimMoved);
}

/** The SSE id of a run state, as the server writes it (`<version>.<budget version>[.<claim version>]`). */
const runStateId = (state: RunState) =>
  state.claim ? `${state.version}.${state.budget.version}.${state.claim.version}` : `${state.version}.${state.budget.version}`;

export function runChanged(deps: StreamDeps, runId: string, { signal }: StateStreamOptions = {}): AsyncGenerator<RunState, void> {
  let seen: RunState | undefined;
  return resuming<RunState>({
    stream: 'runChanged',
    transport: deps.transport(),
    policy: 'latest',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    // Over SSE the server then sends the current state only if it is newer than this.
    request: () => ({
      document: RunChanged,
      variables: { runId },
      lastEventId: seen ? runStateId(seen) : undefined,
    }),
    accept: (result) => {
      const state = result.data.runChanged as RunState;
      if (!isNewerRun(state, seen)) return [];
      seen = state;
      return [state];
    },
  });
}

export async function* leaseChanged(
  deps: StreamDeps,
  unitId: string,
  { signal }: StateStreamOptions = {},
): AsyncGenerator<LeaseState, void> {
  let seen: LeaseState | undefined;
  yield* resuming<LeaseState>({
    stream: 'leaseChanged',
    transport: deps.transport(),
    policy: 'latest',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    request: () => ({ document: LeaseChanged, variables: { unitId }, lastEventId: seen ? String(seen.version) : undefined }),
    accept: (result) => {
      const state = result.data.leaseChanged as LeaseState;
      if (seen && state.version <= seen.version) return [];
      seen = state;
      return [state];
    },
  });
}
