export type { Shard, Stream } from './model.ts';

/**
 * The stream log: per-table streams and their shards in memory (small), their records on
 * disk in the engine's LevelDB. A record is written in the same LevelDB batch as the item
 * change it describes, so it exists exactly when the change does; the newest records are
 * also kept in a bounded cache for readers at the tail (see record-cache.ts).
 */
import { randomBytes } from 'node:crypto';
import type { KeySchemaElement, LevelOp, MainDb } from '../dynalite.ts';
import { inRegion } from '../region.ts';
import { recordKey, type StoredRecord, type StoredShard, type StoredStream, shardKey, streamKey } from './keys.ts';
import { loadStreams } from './load.ts';
import { horizonOf, type Shard, type Stream } from './model.ts';
import { RecordStore } from './record-store.ts';
import { buildRecord, type ItemChange, unchanged, type ViewType } from './records.ts';

export interface StreamLogOptions {
  /** How long a shard stays open before it closes and gets a child (DynamoDB: about 4 hours). */
  shardMaxAgeMs: number;
  /** How many records a shard takes before it closes and gets a child. */
  shardMaxRecords: number;
  /** How long records stay readable before they are trimmed (DynamoDB: 24 hours). */
  retentionMs: number;
  /** Bytes of the newest records kept in memory as well (see record-cache.ts). */
  cacheBytes?: number;
}

export class StreamLog {
  private readonly streams = new Map<string, Stream>();
  private readonly records: RecordStore;
  private lastSeq = 0;
  private readAtStart = 0;
  private metaWrites: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: MainDb,
    private readonly region: string,
    private readonly now: () => number,
    private readonly options: StreamLogOptions,
  ) {
    this.records = new RecordStore(db, options.cacheBytes);
  }

  /** Reads stream and shard definitions written before a restart; records stay on disk. */
  async load() {
    const { streams, recordsRead } = await loadStreams(this.db);
    this.readAtStart = recordsRead;
    for (const stream of streams) {
      this.streams.set(this.idOf(stream.arn), stream);
      this.records.open(stream.arn, stream.lastSeq);
      const ends = [stream.lastSeq, stream.trimmedThrough, stream.endSeq ?? 0, ...stream.shards.map((s) => s.startSeq)];
      this.lastSeq = Math.max(this.lastSeq, ...ends);
    }
  }

  /** Streams are known by their ARN in the engine's region, whatever region it was named in. */
  private idOf(arn: string) {
    return inRegion(arn, this.region);
  }

  /** The table's enabled stream, if any. */
  current(tableName: string) {
    for (const stream of this.streams.values()) {
      if (stream.tableName === tableName && stream.enabled) return stream;
    }
    return undefined;
  }

  /** The table's most recent stream, enabled or not (DescribeTable's LatestStreamArn). */
  latest(tableName: string) {
    let latest: Stream | undefined;
    for (const stream of this.streams.values()) {
      if (stream.tableName === tableName && (!latest || stream.createdAt >= latest.createdAt)) latest = stream;
    }
    return latest;
  }

  list(tableName?: string) {
    return [...this.streams.values()]
      .filter((s) => tableName === undefined || s.tableName === tableName)
      .sort((a, b) => a.createdAt - b.createdAt || a.arn.localeCompare(b.arn));
  }

  /** The stream of that ARN, in whatever region the client named it. */
  get(arn: string) {
    return this.streams.get(this.idOf(arn));
  }

  /** Opens a stream for the table; `alongside` (the table's description) is written in the same batch. */
  async enable(tableName: string, tableArn: string, keySchema: KeySchemaElement[], viewType: ViewType, alongside: LevelOp[] = []) {
    let createdAt = this.now();
    // Labels are timestamps; two streams of one table must not share one.
    while ([...this.streams.values()].some((s) => s.tableName === tableName && s.createdAt === createdAt)) createdAt++;
    const label = new Date(createdAt).toISOString().replace('Z', '');
    const arn = `${tableArn}/stream/${label}`;
    const stream: Stream = {
      arn,
      label,
      tableName,
      keySchema,
      viewType,
      createdAt,
      enabled: true,
      iteratorEpoch: 0,
      trimmedThrough: 0,
      shards: [],
      lastSeq: 0,
      pending: [],
    };
    const shard = this.newShard(undefined, createdAt);
    stream.shards.push(shard);
    this.streams.set(this.idOf(arn), stream);
    this.records.open(arn, shard.startSeq);
    await this.saveMeta(stream, [...alongside, this.shardOp(stream, shard)]);
    shard.saved = true;
    return stream;
  }

  /** Closes the table's stream; `alongside` (the table's description) is written in the same batch. */
  async disable(tableName: string, alongside: LevelOp[] = []) {
    const stream = this.current(tableName);
    if (!stream) return this.db.batch(alongside);
    stream.enabled = false;
    stream.disabledAt = this.now();
    stream.endSeq = this.closeOpenShard(stream)?.endSeq;
    await this.saveMeta(stream, alongside);
  }

  /**
   * Numbers records for `changes` in their tables' streams. Returns the LevelDB ops to write
   * in the same batch as the changes, and `settle`, to call once that batch has succeeded
   * (the records become readable) or failed (they never existed; their numbers stay unused).
   */
  prepare(changes: ItemChange[]): { ops: LevelOp[]; settle(ok: boolean): void } {
    const ops: LevelOp[] = [];
    const appended: { stream: Stream; shards: Shard[]; stored: StoredRecord }[] = [];
    const carried = new Set<Shard>();
    const now = this.now();
    for (const change of changes) {
      const stream = this.current(change.tableName);
      // No stream, or a write that left the item as it was: no record, as in DynamoDB.
      if (!stream || unchanged(change)) continue;
      const shard = this.writableShard(stream, now);
      const seq = ++this.lastSeq;
      stream.lastSeq = seq;
      stream.pending.push(seq);
      const stored: StoredRecord = {
        seq,
        n: shard.count++,
        createdAt: now,
        record: buildRecord(change, seq, now, stream.viewType, this.region),
      };
      const unsaved = stream.shards.filter((s) => !s.saved && !carried.has(s));
      for (const s of unsaved) carried.add(s);
      ops.push(...unsaved.map((s) => this.shardOp(stream, s)), { type: 'put', key: recordKey(stream.arn, seq), value: stored });
      appended.push({ stream, shards: unsaved, stored });
    }
    return {
      ops,
      settle: (ok) => {
        for (const { stream, shards, stored } of appended) {
          if (ok) this.records.add(stream.arn, stored);
          if (ok) for (const shard of shards) shard.saved = true;
          stream.pending.splice(stream.pending.indexOf(stored.seq), 1);
        }
      },
    };
  }

  private writableShard(stream: Stream, now: number) {
    const shard = stream.shards.at(-1) as Shard;
    // Past its age or its record count, the shard closes and its child takes the record.
    if (now - shard.createdAt >= this.options.shardMaxAgeMs || shard.count >= this.options.shardMaxRecords) return this.rolloverNow(stream);
    return shard;
  }

  /** Closes the stream's open shard and opens its child. */
  rollover(stream: Stream) {
    if (!stream.enabled) return;
    const child = this.rolloverNow(stream);
    // Should this write fail, the child's definition goes with its first record's batch instead.
    this.saveMeta(stream, [this.shardOp(stream, child)]).then(
      () => {
        child.saved = true;
      },
      () => undefined,
    );
  }

  private rolloverNow(stream: Stream) {
    const parent = this.closeOpenShard(stream);
    const child = this.newShard(parent?.shardId, this.now());
    stream.shards.push(child);
    return child;
  }

  private closeOpenShard(stream: Stream) {
    const shard = stream.shards.at(-1);
    if (!shard || shard.endSeq !== undefined) return shard;
    // The next number is the child's start (reserved), so the parent's range ends just below it.
    shard.endSeq = this.lastSeq;
    shard.closedAt = this.now();
    return shard;
  }

  private newShard(parentShardId: string | undefined, createdAt: number): Shard {
    // The start number is reserved, so a parent's range always ends below its child's.
    const startSeq = ++this.lastSeq;
    const shardId = `shardId-${String(createdAt).padStart(20, '0')}-${randomBytes(4).toString('hex')}`;
    return { shardId, parentShardId, createdAt, startSeq, count: 0, saved: false };
  }

  private shardOp(stream: Stream, { shardId, parentShardId, createdAt, startSeq }: Shard): LevelOp {
    const value: StoredShard = { arn: stream.arn, shardId, createdAt, startSeq, ...(parentShardId ? { parentShardId } : {}) };
    return { type: 'put', key: shardKey(stream.arn, startSeq), value };
  }

  /** Below this every record of the stream has landed or failed: readers go no further. */
  horizon(stream: Stream) {
    return horizonOf(stream);
  }

  /** The highest sequence number trimmed away within the shard. */
  trimmedIn(stream: Stream, shard: Shard) {
    return Math.min(stream.trimmedThrough, shard.endSeq ?? stream.trimmedThrough);
  }

  /** Up to `limit` committed records of the shard after `position`; `drained`: a closed shard has nothing more. */
  read(stream: Stream, shard: Shard, position: number, limit: number) {
    return this.records.read(stream, shard, position, limit);
  }

  /** Removes committed records created before `cutoff` (all of them for Infinity), oldest first, in batches. */
  async trim(stream: Stream, cutoff: number) {
    // The deletes and the horizon that remembers them land together: a restart never
    // forgets how far the stream went (and so never hands out a number twice).
    return this.records.trim(stream, cutoff, (ops, through) => {
      stream.trimmedThrough = Math.max(stream.trimmedThrough, through);
      return this.saveMeta(stream, ops);
    });
  }

  /** Periodic upkeep: shards past their age roll over, records past retention are trimmed, old shards go. */
  async tick() {
    const now = this.now();
    const expired = (at?: number) => at !== undefined && now - at > this.options.retentionMs;
    for (const stream of [...this.streams.values()]) {
      const open = stream.shards.at(-1);
      if (stream.enabled && open && open.endSeq === undefined && now - open.createdAt >= this.options.shardMaxAgeMs) this.rollover(stream);
      await this.trim(stream, now - this.options.retentionMs);
      // A shard closed longer ago than the retention holds nothing readable any more.
      const gone = stream.shards.filter((s) => expired(s.closedAt));
      if (gone.length > 0) {
        stream.shards = stream.shards.filter((s) => !gone.includes(s));
        await this.saveMeta(
          stream,
          gone.map((s) => ({ type: 'del', key: shardKey(stream.arn, s.startSeq) })),
        );
      }
      if (!stream.enabled && expired(stream.disabledAt) && stream.shards.length === 0) {
        this.streams.delete(this.idOf(stream.arn));
        this.records.drop(stream.arn);
        await this.saveMeta(stream, [{ type: 'del', key: streamKey(stream.arn) }]);
      }
    }
  }

  expireIterators(stream: Stream) {
    stream.iteratorEpoch++;
    return this.saveMeta(stream);
  }

  /** Metadata writes go one at a time, each writing the state as it is then, so the last one wins. */
  private saveMeta(stream: Stream, alongside: LevelOp[] = []) {
    const write = this.metaWrites.then(() => {
      if (!this.streams.has(this.idOf(stream.arn))) return this.db.batch(alongside);
      const { shards: _, lastSeq: __, pending: ___, ...stored } = stream;
      return this.db.batch([...alongside, { type: 'put', key: streamKey(stream.arn), value: stored satisfies StoredStream }]);
    });
    this.metaWrites = write.catch(() => undefined);
    return write;
  }

  /** Waits for metadata writes in flight (before the database closes). */
  flush() {
    return this.metaWrites;
  }

  stats() {
    const { records, bytes, hits, misses } = this.records.cacheStats();
    return { cachedRecords: records, cachedBytes: bytes, cacheHits: hits, diskReads: misses, readAtStart: this.readAtStart };
  }
}
