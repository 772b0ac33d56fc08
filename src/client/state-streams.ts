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

/** Of two run states, whether `next` is newer: neither version went back, one went forward. */
export function isNewerRun(next: RunState, seen: RunState | undefined) {
  if (!seen) return true;
  const forward = next.version >= seen.version && next.budget.version >= seen.budget.version;
  return forward && (next.version > seen.version || next.budget.version > seen.budget.version);
}

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
      lastEventId: seen ? `${seen.version}.${seen.budget.version}` : undefined,
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
