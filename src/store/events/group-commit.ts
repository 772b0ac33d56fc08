/**
 * Group commit: concurrent appends to one run in this process are written together, as one
 * TransactWriteItems of puts at consecutive seqs (each still conditional on its seq being
 * free), instead of racing each other for the same next seq. While one batch is in flight,
 * the next one gathers. Writers in other processes still meet by conditional failure.
 */
import type { RunEvent } from '../../domain/run.ts';

export interface Waiting {
  type: string;
  payload: unknown;
  createdAt: Date;
  /** Rough size of the item, to keep a batch within DynamoDB's 4 MB per transaction. */
  bytes: number;
  resolve(event: RunEvent): void;
  reject(err: unknown): void;
}

/** DynamoDB's limits on one TransactWriteItems, with room to spare on size. */
const MAX_BATCH = 100;
const MAX_BATCH_BYTES = 3 * 1024 * 1024;

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
}

export function createGroupCommit({ commit, alone, measure }: GroupCommitOptions) {
  const queues = new Map<string, { waiting: Waiting[]; draining: boolean }>();

  async function drain(tenant: string, runId: string, key: string, fencingToken: number | undefined) {
    const queue = queues.get(key);
    if (!queue || queue.draining) return;
    queue.draining = true;
    while (queue.waiting.length > 0) {
      let bytes = 0;
      let count = 0;
      while (
        count < queue.waiting.length &&
        count < MAX_BATCH &&
        (count === 0 || bytes + (queue.waiting[count]?.bytes ?? 0) <= MAX_BATCH_BYTES)
      ) {
        bytes += queue.waiting[count]?.bytes ?? 0;
        count++;
      }
      const batch = queue.waiting.splice(0, count);
      try {
        const events = await commit(tenant, runId, batch, fencingToken);
        for (const [i, waiting] of batch.entries()) waiting.resolve(events[i] as RunEvent);
      } catch (err) {
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
        target.waiting.push({ type, payload, createdAt, bytes, resolve, reject });
        void drain(tenant, runId, key, fencingToken);
      });
    },
  };
}
