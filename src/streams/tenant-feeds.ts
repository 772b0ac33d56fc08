/**
 * Tenant-wide subscriptions (runsChanged, leasesChanged): every change of any run or lease of
 * the tenant, as the thing's whole new state. Like the one-thing feeds, changes arrive twice
 * (fast path, then the stream) and a subscriber only moves forward by version; unlike them
 * there is no state to start from (the listings give that) and no way to re-read everything.
 */
import { ChangesLost, FellBehind } from '../domain/errors.ts';
import type { Budget, Lease, Run, RunStatus } from '../domain/run.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import { TtlCache } from '../lib/ttl-cache.ts';
import { topics } from './changes.ts';
import type { FeedTable } from './feed-table.ts';
import type { Hub } from './hub.ts';
import { KeyedLatest } from './keyed-latest.ts';

/** Runs (or units) with a change waiting for one subscriber; one more fails its stream (FellBehind). */
export const MAX_WAITING_CHANGES = 1000;
/** Versions remembered per subscriber, to drop the stream's copy of a change already sent; a forgotten one is sent twice (same version). */
const REMEMBERED_VERSIONS = 10_000;
const REMEMBER_MS = 10 * 60_000;

interface FeedDeps {
  hub: Hub;
  /** The table as this feed reads it (within its connection's and its tenant's reads). */
  table: Pick<FeedTable, 'runState' | 'budget'>;
  /** Waiting changes per subscriber (default MAX_WAITING_CHANGES). */
  maxWaiting?: number;
}

export interface RunsFeedQuery {
  tenant: string;
  /** Only runs in this status after the change. */
  status?: RunStatus;
  sendBuffer?: SendBuffer;
}

/** A run's new state. */
export interface RunsChange {
  run: Run;
  budget: Budget | null;
}

type Waiting = { run?: Run; budget?: Budget };

const remembered = () =>
  new TtlCache<string, { run: number; budget: number }>({ max: REMEMBERED_VERSIONS, ttlMs: REMEMBER_MS, now: Date.now });

export function runsFeed({ hub, table, maxWaiting = MAX_WAITING_CHANGES }: FeedDeps, query: RunsFeedQuery) {
  const { tenant, status } = query;
  const sent = remembered();
  const queue = new KeyedLatest<Waiting>({
    max: maxWaiting,
    sendBuffer: query.sendBuffer,
    overflow: () => new FellBehind('runs', maxWaiting),
    onClose: () => unsubscribe(),
  });
  const unsubscribe = hub.subscribe(topics.runs(tenant), {
    change(change) {
      if (change.kind === 'run')
        queue.offer(change.runId, (w) =>
          change.run.version > Math.max(w?.run?.version ?? 0, sent.get(change.runId)?.run ?? 0) ? { ...w, run: change.run } : undefined,
        );
      else if (change.kind === 'budget')
        queue.offer(change.runId, (w) =>
          change.budget.version > Math.max(w?.budget?.version ?? 0, sent.get(change.runId)?.budget ?? 0)
            ? { ...w, budget: change.budget }
            : undefined,
        );
    },
    resync: () => queue.fail(new ChangesLost('runs')),
  });

  /**
   * What did not change is read when the subscriber takes the change (its reads go at its
   * pace), so that it knows both versions and drops the stream's copies by them.
   */
  async function complete(runId: string, waiting: Waiting): Promise<RunsChange | undefined> {
    if (waiting.run) return { run: waiting.run, budget: waiting.budget ?? (await table.budget(runId)) };
    const snapshot = await table.runState(runId);
    if (!snapshot) return undefined;
    const budget = (snapshot.budget?.version ?? 0) > (waiting.budget?.version ?? 0) ? snapshot.budget : (waiting.budget ?? null);
    return { run: snapshot.run, budget };
  }

  const markSent = (key: string, run: number, budget: number) => {
    const had = sent.get(key);
    sent.set(key, { run: Math.max(had?.run ?? 0, run), budget: Math.max(had?.budget ?? 0, budget) });
  };

  async function* deliver(): AsyncGenerator<RunsChange> {
    for await (const { key, value } of queue) {
      const before = sent.get(key);
      // Taken versions count as sent while the rest is read: the stream's copy of this very change, arriving meanwhile, is dropped.
      markSent(key, value.run?.version ?? 0, value.budget?.version ?? 0);
      const change = await complete(key, value);
      if (!change) continue;
      markSent(key, change.run.version, change.budget?.version ?? 0);
      // Nothing newer than what was sent before (the read found only versions already handed out): not sent again.
      if (before && change.run.version <= before.run && (change.budget?.version ?? 0) <= before.budget) continue;
      if (status && change.run.status !== status) continue;
      yield change;
    }
  }
  return endingAtOnce(deliver(), queue);
}

export interface LeasesFeedQuery {
  tenant: string;
  sendBuffer?: SendBuffer;
}

export function leasesFeed({ hub, maxWaiting = MAX_WAITING_CHANGES }: Omit<FeedDeps, 'table'>, query: LeasesFeedQuery) {
  const sent = remembered();
  const queue = new KeyedLatest<Lease>({
    max: maxWaiting,
    sendBuffer: query.sendBuffer,
    overflow: () => new FellBehind('leases', maxWaiting),
    onClose: () => unsubscribe(),
  });
  const unsubscribe = hub.subscribe(topics.leases(query.tenant), {
    change(change) {
      if (change.kind !== 'lease') return;
      const { lease } = change;
      queue.offer(change.unitId, (w) => (lease.version > Math.max(w?.version ?? 0, sent.get(change.unitId)?.run ?? 0) ? lease : undefined));
    },
    resync: () => queue.fail(new ChangesLost('leases')),
  });
  async function* deliver(): AsyncGenerator<Lease> {
    for await (const { key, value } of queue) {
      sent.set(key, { run: Math.max(sent.get(key)?.run ?? 0, value.version), budget: 0 });
      yield value;
    }
  }
  return endingAtOnce(deliver(), queue);
}

/**
 * A feed's generator whose return() ends it at once: an async generator's own return() waits
 * behind the next() it is suspended in, so a completed subscription kept its place (and its id)
 * until the tenant's next change. Ending the queue first lets that next() finish.
 */
function endingAtOnce<T>(feed: AsyncGenerator<T>, queue: { end(): void; return(): unknown }) {
  const stop = feed.return.bind(feed);
  return Object.assign(feed, {
    end: () => queue.end(),
    return: (value?: unknown) => {
      void queue.return();
      return stop(value as never);
    },
  });
}
