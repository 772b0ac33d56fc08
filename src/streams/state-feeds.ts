/**
 * Run and lease subscriptions: first the current state, then the state after each change.
 * Changes arrive twice (fast path, then the stream) and in any order; each carries a
 * version, and a subscriber only ever moves forward, so a late stream copy never
 * overwrites a newer state.
 */

import type { Budget, Lease, Run, RunClaim } from '../domain/run.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import { topics } from './changes.ts';
import type { FeedTable } from './feed-table.ts';
import type { Hub } from './hub.ts';
import { Latest } from './latest.ts';
import type { Source } from './lazy.ts';

export interface RunState {
  run: Run;
  budget: Budget | null;
  /** Its claim row as last written (null: never claimed). */
  claim: RunClaim | null;
}

interface FeedDeps {
  hub: Hub;
  /** The table as this feed reads it (within its connection's and its tenant's reads). */
  table: Pick<FeedTable, 'runState' | 'lease'>;
  onError?: (err: unknown) => void;
}

const newer = (candidate: { version: number } | null | undefined, current: { version: number } | null | undefined) =>
  !!candidate && (!current || candidate.version > current.version);

/** Status and budget changes of a run, as its whole latest state. */
export interface RunFeedQuery {
  tenant: string;
  runId: string;
  sendBuffer?: SendBuffer;
  /** The versions the subscriber already has (an SSE client resuming): the current state comes first only if newer. */
  seen?: { run: number; budget: number; claim?: number };
}

export interface LeaseFeedQuery {
  tenant: string;
  unitId: string;
  sendBuffer?: SendBuffer;
  /** The lease version the subscriber already has. */
  seen?: number;
}

/** Status and budget changes of a run, as its whole latest state. */
export function runFeed({ hub, table, onError }: FeedDeps, { tenant, runId, sendBuffer, seen }: RunFeedQuery): Source<RunState> {
  let run: Run | undefined;
  let budget: Budget | null = null;
  let claim: RunClaim | null = null;
  const out = new Latest<RunState>({ sendBuffer, onClose: () => unsubscribe() });
  let emitting = false;
  /**
   * The state once the changes published together have all been applied: a transaction's rows
   * (a cancel's run, claim and budget rows, read back in one request) come one after another in
   * one turn, and a subscriber must see the run cancelled with its claim ended, never a state
   * in between that was never in the table.
   */
  const emit = () => {
    if (emitting) return;
    emitting = true;
    queueMicrotask(() => {
      emitting = false;
      if (run) out.push({ run, budget, claim });
    });
  };

  /** Takes what is newer than what the subscriber has; tells it when something was. */
  const apply = (next: { run?: Run | null; budget?: Budget | null; claim?: RunClaim | null }) => {
    let changed = false;
    if (newer(next.run, run)) {
      run = next.run as Run;
      changed = true;
    }
    if (newer(next.budget, budget)) {
      budget = next.budget as Budget;
      changed = true;
    }
    if (newer(next.claim, claim)) {
      claim = next.claim as RunClaim;
      changed = true;
    }
    return changed;
  };

  const reread = async () => {
    const snapshot = await table.runState(runId);
    return snapshot ? { run: snapshot.run, budget: snapshot.budget, claim: snapshot.claim } : {};
  };

  let ready = false;
  let rereading: Promise<unknown> | undefined;
  const early: Parameters<typeof apply>[0][] = [];
  const unsubscribe = hub.subscribe(topics.run(tenant, runId), {
    change(change) {
      const next =
        change.kind === 'run'
          ? { run: change.run }
          : change.kind === 'budget'
            ? { budget: change.budget }
            : change.kind === 'claim'
              ? { claim: change.claim }
              : undefined;
      if (!next) return;
      if (!ready) return void early.push(next);
      if (apply(next)) emit();
    },
    resync() {
      reread()
        .then((state) => apply(state) && emit())
        .catch(onError);
    },
    refill() {
      // One read at a time: a slow table does not pile reads up.
      if (rereading) return;
      rereading = reread()
        .then((state) => apply(state) && emit())
        .catch(onError)
        .finally(() => {
          rereading = undefined;
        });
    },
  });

  reread()
    .then((state) => {
      apply(state);
      ready = true;
      for (const change of early) apply(change);
      if (!seen || (run?.version ?? 0) > seen.run || (budget?.version ?? 0) > seen.budget || (claim?.version ?? 0) > (seen.claim ?? 0))
        emit();
    })
    .catch((err) => {
      onError?.(err);
      out.fail(err);
    });
  return out;
}

/** Changes of a unit's lease. */
export function leaseFeed({ hub, table, onError }: FeedDeps, { tenant, unitId, sendBuffer, seen }: LeaseFeedQuery): Source<Lease> {
  let lease: Lease | null = null;
  const out = new Latest<Lease>({ sendBuffer, onClose: () => unsubscribe() });
  let ready = false;
  let rereading: Promise<unknown> | undefined;
  const early: Lease[] = [];
  const apply = (next: Lease | null) => {
    if (!newer(next, lease)) return false;
    lease = next;
    return true;
  };
  const unsubscribe = hub.subscribe(topics.lease(tenant, unitId), {
    change(change) {
      if (change.kind !== 'lease') return;
      if (!ready) return void early.push(change.lease);
      if (apply(change.lease) && lease) out.push(lease);
    },
    resync() {
      table
        .lease(unitId)
        .then((current) => apply(current) && lease && out.push(lease))
        .catch(onError);
    },
    refill() {
      if (rereading) return;
      rereading = table
        .lease(unitId)
        .then((current) => apply(current) && lease && out.push(lease))
        .catch(onError)
        .finally(() => {
          rereading = undefined;
        });
    },
  });
  table
    .lease(unitId)
    .then((current) => {
      apply(current);
      ready = true;
      for (const change of early) apply(change);
      if (lease && lease.version > (seen ?? 0)) out.push(lease);
    })
    .catch((err) => {
      onError?.(err);
      out.fail(err);
    });
  return out;
}
