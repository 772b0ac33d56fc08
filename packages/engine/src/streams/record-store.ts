/**
 * A stream's records where they live: on disk with the data (in the in-memory store with
 * --in-memory), the newest also in a bounded cache in memory (record-cache.ts).
 */
import type { LevelOp, MainDb } from '../dynalite.ts';
import { recordKey, recordsEnd, type StoredRecord } from './keys.ts';
import { horizonOf, type Shard, type Stream } from './model.ts';
import { RecordCache } from './record-cache.ts';

/** Records deleted per LevelDB batch when trimming; a trim goes on batch after batch. */
const TRIM_BATCH = 1_000;

export class RecordStore {
  private readonly cache: RecordCache;

  constructor(
    private readonly db: MainDb,
    cacheBytes?: number,
  ) {
    this.cache = new RecordCache(cacheBytes);
  }

  /** Caches the stream's records after `floor` from now on. */
  open(arn: string, floor: number) {
    this.cache.open(arn, floor);
  }

  drop(arn: string) {
    this.cache.drop(arn);
  }

  /** A record whose batch has landed. */
  add(arn: string, stored: StoredRecord) {
    this.cache.add(arn, stored);
  }

  /**
   * Up to `limit` committed records of the shard after `position`, from memory when the
   * cache holds them, else from disk. `drained`: a closed shard has nothing more.
   */
  async read(stream: Stream, shard: Shard, position: number, limit: number) {
    const horizon = horizonOf(stream);
    const end = Math.min(horizon, shard.endSeq ?? Number.POSITIVE_INFINITY);
    let records: StoredRecord[] = [];
    if (position < end && this.cache.covers(stream.arn, position)) {
      records = this.cache.read(stream.arn, position, end, limit);
    } else if (position < end) {
      const range = { gt: recordKey(stream.arn, position), lte: recordKey(stream.arn, end), limit };
      for await (const value of this.db.values(range)) records.push(value as StoredRecord);
    }
    const drained = shard.endSeq !== undefined && horizon >= shard.endSeq && records.length < limit;
    return { records, drained };
  }

  /**
   * Deletes the stream's committed records created before `cutoff`, oldest first, in
   * batches; `save` writes each batch with the stream's new trim horizon.
   */
  async trim(stream: Stream, cutoff: number, save: (ops: LevelOp[], through: number) => Promise<unknown>) {
    let trimmed = 0;
    for (let more = true; more; ) {
      const horizon = horizonOf(stream);
      const ops: LevelOp[] = [];
      let through = stream.trimmedThrough;
      const range = { gt: recordKey(stream.arn, through), lt: recordsEnd(stream.arn), limit: TRIM_BATCH };
      more = false;
      for await (const value of this.db.values(range)) {
        const { seq, createdAt } = value as StoredRecord;
        // Only records whose batch has landed, and old enough.
        more = seq <= horizon && createdAt < cutoff;
        if (!more) break;
        ops.push({ type: 'del', key: recordKey(stream.arn, seq) });
        through = seq;
      }
      if (ops.length === 0) break;
      more &&= ops.length === TRIM_BATCH;
      await save(ops, through);
      trimmed += ops.length;
    }
    return trimmed;
  }

  cacheStats() {
    return this.cache.stats();
  }
}
