/**
 * runsChanged and leasesChanged: every change of the tenant's runs (or leases), for a list
 * that stays live. They start with no state (list first, then apply what comes, newer
 * versions winning) and cannot replay what passed while they were away: `onResubscribed` is
 * called each time the stream subscribes again, the moment to list again.
 */
import type { ResultOf } from './graphql.ts';
import { LeasesChanged, RunsChanged } from './operations.ts';
import { resuming } from './resuming.ts';
import type { StreamDeps } from './run-events.ts';
import { isNewerRun, type LeaseState, type RunState } from './state-streams.ts';

export type RunsChangedState = ResultOf<typeof RunsChanged>['runsChanged'];

export interface TenantStreamOptions {
  signal?: AbortSignal;
  /** Called before each resubscription (after a lost connection, or a consumer too far behind): list again. */
  onResubscribed?: () => void;
}

/** Nothing to hand out before a resubscription: only the caller to tell. */
const told = (onResubscribed: (() => void) | undefined): AsyncIterable<never> => {
  onResubscribed?.();
  return { [Symbol.asyncIterator]: () => ({ next: async () => ({ done: true, value: undefined }) }) };
};

/** Versions remembered to drop a change older than one already handed out; past this the oldest are forgotten. */
const REMEMBERED = 10_000;

/** Keeps `key`'s newest value, forgetting the one remembered longest ago past `max`. */
export function remember<V>(seen: Map<string, V>, key: string, value: V, max = REMEMBERED) {
  seen.delete(key);
  seen.set(key, value);
  if (seen.size > max) seen.delete(seen.keys().next().value as string);
}

export function runsChanged(
  deps: StreamDeps,
  { status, signal, onResubscribed }: TenantStreamOptions & { status?: RunState['status'] } = {},
): AsyncGenerator<RunsChangedState, void> {
  const seen = new Map<string, RunState>();
  return resuming<RunsChangedState>({
    stream: 'runsChanged',
    transport: deps.transport(),
    // Every change counts (each run is its own), so a consumer too far behind subscribes again and lists.
    policy: 'backlog',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    request: () => ({ document: RunsChanged, variables: { status } }),
    resumed: () => told(onResubscribed),
    accept: (result) => {
      const state = result.data.runsChanged as RunsChangedState;
      if (!isNewerRun(state, seen.get(state.id))) return [];
      remember(seen, state.id, state);
      return [state];
    },
  });
}

export function leasesChanged(deps: StreamDeps, { signal, onResubscribed }: TenantStreamOptions = {}): AsyncGenerator<LeaseState, void> {
  const seen = new Map<string, number>();
  return resuming<LeaseState>({
    stream: 'leasesChanged',
    transport: deps.transport(),
    policy: 'backlog',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    request: () => ({ document: LeasesChanged, variables: {} }),
    resumed: () => told(onResubscribed),
    accept: (result) => {
      const state = result.data.leasesChanged as LeaseState;
      if (state.version <= (seen.get(state.unitId) ?? 0)) return [];
      remember(seen, state.unitId, state.version);
      return [state];
    },
  });
}
