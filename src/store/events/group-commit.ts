/**
 * Group commit: concurrent appends to one run in this process are written together, as one
 * TransactWriteItems of puts at consecutive seqs (each still conditional on its seq being
 * free), instead of racing each other for the same next seq. While one batch is in flight,
 * the next one gathers (the first, for one turn of the event loop). Writers in other
 * processes still meet by conditional failure.
 *
 * A batch its partitions throttle (nothing written) goes back to the head of the queue, the
 * run's batches shrink by half, and the queue waits (jittered, growing) before it tries again;
 * each batch that lands lets them grow back by a quarter. A transaction takes all its units at
 * once (twice an item's), so a smaller batch fits the units its partition has regained sooner.
 */
import type { RunEvent } from '../../domain/run.ts';
import { sleep } from '../../lib/backoff.ts';
import { TtlCache } from '../../lib/ttl-cache.ts';

export interface Waiting {
  type: string;
  payload: unknown;
  createdAt: Date;
  /** Rough size of the item, to keep a batch within DynamoDB's 4 MB per transaction. */
  bytes: number;
  /** How many batches it was in that were throttled. */
  throttles: number;
  resolve(event: RunEvent): void;
  reject(err: unknown): void;
}

/** DynamoDB's limits on one TransactWriteItems, with room to spare on size. */
export const MAX_BATCH = 100;
const MAX_BATCH_BYTES = 3 * 1024 * 1024;
/** Runs whose batches are kept smaller after a throttle; past it the one throttled longest ago starts again at MAX_BATCH. */
const MAX_SHRUNK_RUNS = 10_000;
/** A run not throttled for this long writes full batches again. */
const SHRUNK_FOR_MS = 60_000;

type Commit = (tenant: string, runId: string, batch: Waiting[], fencingToken?: number) => Promise<RunEvent[]>;

export interface GroupCommitOptions {
  commit: Commit;
  /** Whether a batch that failed with err is tried again one append at a time: only for errors that prove it was not written. */
  alone: (err: unknown) => boolean;
  /**
   * The size of an append's item, checking on the way that it can be stored at all; throws
   * for one that cannot, which then fails alone, before it joins a batch.
   */
  measure: (type: string, payload: unknown) => number;
  /** Whether err is a throttle (nothing written): the batch shrinks and goes again after a wait. */
  throttled?: (err: unknown) => boolean;
  /** Batches one append may be in that are throttled before it fails with the throttle. */
  throttleAttempts?: number;
  /** The wait after a batch's throttle number `attempt` (0 first). */
  throttleDelay?: (attempt: number) => number;
  /** Called for each append failed by a throttle, its tries used up. */
  onGiveUp?: () => void;
}

export function createGroupCommit(options: GroupCommitOptions) {
  const { commit, alone, measure, throttled = () => false, throttleAttempts = 10, throttleDelay = () => 0, onGiveUp } = options;
  const queues = new Map<string, { waiting: Waiting[]; draining: boolean }>();
  /** The batch size of runs throttled lately (others: MAX_BATCH). */
  const limits = new TtlCache<string, number>({ max: MAX_SHRUNK_RUNS, ttlMs: SHRUNK_FOR_MS, now: Date.now });
  const limitOf = (key: string) => limits.get(key) ?? MAX_BATCH;

  async function drain(tenant: string, runId: string, key: string, fencingToken: number | undefined) {
    const queue = queues.get(key);
    if (!queue || queue.draining) return;
    queue.draining = true;
    // One turn of the event loop first, so appends whose requests were read with this one join
    // its batch: an engine in this process may answer without a turn of its own, and every
    // batch would then hold one append.
    await new Promise(setImmediate);
    let throttledInARow = 0;
    while (queue.waiting.length > 0) {
      let bytes = 0;
      let count = 0;
      const limit = limitOf(key);
      while (
        count < queue.waiting.length &&
        count < limit &&
        (count === 0 || bytes + (queue.waiting[count]?.bytes ?? 0) <= MAX_BATCH_BYTES)
      ) {
        bytes += queue.waiting[count]?.bytes ?? 0;
        count++;
      }
      const batch = queue.waiting.splice(0, count);
      try {
        const events = await commit(tenant, runId, batch, fencingToken);
        for (const [i, waiting] of batch.entries()) waiting.resolve(events[i] as RunEvent);
        throttledInARow = 0;
        if (limit < MAX_BATCH) limits.set(key, Math.min(MAX_BATCH, Math.ceil(limit * 1.25)));
      } catch (err) {
        if (throttled(err)) {
          limits.set(key, Math.max(1, Math.floor(batch.length / 2)));
          const again = batch.filter((waiting) => ++waiting.throttles < throttleAttempts);
          for (const waiting of batch)
            if (!again.includes(waiting)) {
              onGiveUp?.();
              waiting.reject(err);
            }
          queue.waiting.unshift(...again);
          await sleep(throttleDelay(throttledInARow++));
          continue;
        }
        if (batch.length === 1 || !alone(err)) for (const waiting of batch) waiting.reject(err);
        // One bad append (too large, say) must not fail the others: each goes alone, and gets its own answer.
        else
          for (const waiting of batch)
            await commit(tenant, runId, [waiting], fencingToken).then(([event]) => waiting.resolve(event as RunEvent), waiting.reject);
      }
    }
    queue.draining = false;
    queues.delete(key);
  }

  return {
    /**
     * Queues an append; it is written with the others waiting for the same run (and, fenced, the
     * same claim token: a batch's fence is checked once, for all of it).
     */
    append(tenant: string, runId: string, type: string, payload: unknown, createdAt: Date, fencingToken?: number) {
      const key = `${tenant}\u0000${runId}\u0000${fencingToken ?? ''}`;
      let queue = queues.get(key);
      if (!queue) {
        queue = { waiting: [], draining: false };
        queues.set(key, queue);
      }
      const target = queue;
      return new Promise<RunEvent>((resolve, reject) => {
        const bytes = measure(type, payload);
        target.waiting.push({ type, payload, createdAt, bytes, throttles: 0, resolve, reject });
        void drain(tenant, runId, key, fencingToken);
      });
    },
  };
}
