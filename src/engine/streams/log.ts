/**
 * The stream log: per-table streams, their shards and records, kept in memory for reads
 * and in the engine's LevelDB for restarts. A record is written in the same LevelDB batch
 * as the item change it describes, so it exists exactly when the change does.
 */
import { randomBytes } from 'node:crypto';
import type { KeySchemaElement, LevelOp, MainDb } from '../dynalite.ts';
import { inRegion } from '../region.ts';
import { buildRecord, type ItemChange, type StreamRecord, unchanged, type ViewType } from './records.ts';

export interface StreamLogOptions {
  /** How long a shard stays open before it closes and gets a child (DynamoDB: about 4 hours). */
  shardMaxAgeMs: number;
  /** How many records a shard takes before it closes and gets a child. */
  shardMaxRecords: number;
  /** How long records stay readable before they are trimmed (DynamoDB: 24 hours). */
  retentionMs: number;
}

export interface Entry {
  seq: number;
  createdAt: number;
  /** False while the LevelDB batch holding it is in flight: readers stop at the first such entry. */
  committed: boolean;
  record: StreamRecord;
}

export interface Shard {
  shardId: string;
  parentShardId?: string;
  createdAt: number;
  closedAt?: number;
  startSeq: number;
  endSeq?: number;
  /** Highest sequence number removed by trimming (0: nothing trimmed). */
  trimmedThrough: number;
  entries: Entry[];
}

export interface Stream {
  arn: string;
  label: string;
  tableName: string;
  keySchema: KeySchemaElement[];
  viewType: ViewType;
  createdAt: number;
  enabled: boolean;
  disabledAt?: number;
  /** Iterators issued before the current epoch are expired (fault injection). */
  iteratorEpoch: number;
  shards: Shard[];
}

const streamKey = (arn: string) => `rp-stream~${arn}`;
/** The highest seq a shard ever held (trimmed records included), or its start when it held none. */
const lastSeqOf = (shard: Shard) => Math.max(shard.entries.at(-1)?.seq ?? 0, shard.trimmedThrough, shard.startSeq);
const recordKey = (arn: string, seq: number) => `rp-srec~${arn}~${String(seq).padStart(21, '0')}`;

interface StoredRecord {
  arn: string;
  shardId: string;
  seq: number;
  createdAt: number;
  record: StreamRecord;
}

export class StreamLog {
  private readonly streams = new Map<string, Stream>();
  private lastSeq = 0;
  private metaWrites: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: MainDb,
    private readonly region: string,
    private readonly now: () => number,
    private readonly options: StreamLogOptions,
  ) {}

  /** Reads streams and records written before a restart. */
  async load() {
    for await (const value of this.db.values({ gte: 'rp-stream~', lt: 'rp-stream~\xff' })) {
      const stream = value as Stream;
      for (const shard of stream.shards) {
        shard.entries = [];
        this.lastSeq = Math.max(this.lastSeq, shard.startSeq, shard.endSeq ?? 0, shard.trimmedThrough);
      }
      this.streams.set(this.idOf(stream.arn), stream);
    }
    for await (const value of this.db.values({ gte: 'rp-srec~', lt: 'rp-srec~\xff' })) {
      const stored = value as StoredRecord;
      const stream = this.streams.get(this.idOf(stored.arn));
      if (!stream) continue;
      const shard = stream.shards.find((s) => s.shardId === stored.shardId) ?? this.recoverShard(stream, stored);
      shard.entries.push({ seq: stored.seq, createdAt: stored.createdAt, committed: true, record: stored.record });
      this.lastSeq = Math.max(this.lastSeq, stored.seq);
    }
  }

  /** A record whose shard's metadata did not reach the disk before a crash: rebuild the shard. */
  private recoverShard(stream: Stream, stored: StoredRecord): Shard {
    const last = stream.shards.at(-1);
    if (last && last.endSeq === undefined) {
      last.endSeq = lastSeqOf(last);
      last.closedAt = stored.createdAt;
    }
    const shard: Shard = {
      shardId: stored.shardId,
      parentShardId: last?.shardId,
      createdAt: stored.createdAt,
      startSeq: stored.seq - 1,
      trimmedThrough: 0,
      entries: [],
    };
    stream.shards.push(shard);
    return shard;
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

  /** Streams are known by their ARN in the engine's region, whatever region it was named in. */
  private idOf(arn: string) {
    return inRegion(arn, this.region);
  }

  /** The stream of that ARN, in whatever region the client named it. */
  get(arn: string) {
    return this.streams.get(this.idOf(arn));
  }

  async enable(tableName: string, tableArn: string, keySchema: KeySchemaElement[], viewType: ViewType) {
    let createdAt = this.now();
    // Labels are timestamps; two streams of one table must not share one.
    while ([...this.streams.values()].some((s) => s.tableName === tableName && s.createdAt === createdAt)) createdAt++;
    const label = new Date(createdAt).toISOString().replace('Z', '');
    const stream: Stream = {
      arn: `${tableArn}/stream/${label}`,
      label,
      tableName,
      keySchema,
      viewType,
      createdAt,
      enabled: true,
      iteratorEpoch: 0,
      shards: [],
    };
    stream.shards.push(this.newShard(undefined, createdAt));
    this.streams.set(this.idOf(stream.arn), stream);
    await this.saveMeta(stream);
    return stream;
  }

  async disable(tableName: string) {
    const stream = this.current(tableName);
    if (!stream) return;
    stream.enabled = false;
    stream.disabledAt = this.now();
    this.closeOpenShard(stream);
    await this.saveMeta(stream);
  }

  /**
   * Appends records for `changes` to their tables' streams. Returns the LevelDB ops to write
   * in the same batch as the changes, and `settle`, to call once that batch has succeeded
   * (the records become readable) or failed (they vanish).
   */
  prepare(changes: ItemChange[]): { ops: LevelOp[]; settle(ok: boolean): void } {
    const ops: LevelOp[] = [];
    const appended: { shard: Shard; entry: Entry }[] = [];
    const now = this.now();
    for (const change of changes) {
      const stream = this.current(change.tableName);
      if (!stream || unchanged(change)) continue;
      const shard = this.writableShard(stream, now);
      const seq = ++this.lastSeq;
      const entry: Entry = { seq, createdAt: now, committed: false, record: buildRecord(change, seq, now, stream.viewType, this.region) };
      shard.entries.push(entry);
      appended.push({ shard, entry });
      const stored: StoredRecord = { arn: stream.arn, shardId: shard.shardId, seq, createdAt: now, record: entry.record };
      ops.push({ type: 'put', key: recordKey(stream.arn, seq), value: stored });
    }
    return {
      ops,
      settle(ok) {
        for (const { shard, entry } of appended) {
          if (ok) entry.committed = true;
          else shard.entries.splice(shard.entries.indexOf(entry), 1);
        }
      },
    };
  }

  private writableShard(stream: Stream, now: number) {
    let shard = stream.shards.at(-1) as Shard;
    if (now - shard.createdAt >= this.options.shardMaxAgeMs || shard.entries.length >= this.options.shardMaxRecords) {
      shard = this.rolloverNow(stream);
    }
    return shard;
  }

  /** Closes the stream's open shard and opens its child. */
  rollover(stream: Stream) {
    if (!stream.enabled) return;
    this.rolloverNow(stream);
  }

  private rolloverNow(stream: Stream) {
    const parent = this.closeOpenShard(stream);
    const child = this.newShard(parent?.shardId, this.now());
    stream.shards.push(child);
    void this.saveMeta(stream);
    return child;
  }

  private closeOpenShard(stream: Stream) {
    const shard = stream.shards.at(-1);
    if (!shard || shard.endSeq !== undefined) return shard;
    shard.endSeq = lastSeqOf(shard);
    shard.closedAt = this.now();
    return shard;
  }

  private newShard(parentShardId: string | undefined, createdAt: number): Shard {
    // The start number is reserved, so a parent's range always ends below its child's.
    const startSeq = ++this.lastSeq;
    const shardId = `shardId-${String(createdAt).padStart(20, '0')}-${randomBytes(4).toString('hex')}`;
    return { shardId, parentShardId, createdAt, startSeq, trimmedThrough: 0, entries: [] };
  }

  /** Removes committed records created before `cutoff` (all of them for Infinity). */
  async trim(stream: Stream, cutoff: number) {
    const ops: LevelOp[] = [];
    for (const shard of stream.shards) {
      let n = 0;
      while (n < shard.entries.length) {
        const entry = shard.entries[n] as Entry;
        if (!entry.committed || entry.createdAt >= cutoff) break;
        ops.push({ type: 'del', key: recordKey(stream.arn, entry.seq) });
        shard.trimmedThrough = entry.seq;
        n++;
      }
      shard.entries.splice(0, n);
    }
    if (ops.length === 0) return 0;
    // The deletes and the metadata that remembers them land together: a restart never
    // forgets how far the stream went (and so never hands out a seq twice).
    await this.saveMeta(stream, ops);
    return ops.length;
  }

  /** Periodic upkeep: shards past their age roll over, records past retention are trimmed. */
  async tick() {
    const now = this.now();
    for (const stream of [...this.streams.values()]) {
      const open = stream.shards.at(-1);
      if (stream.enabled && open && open.endSeq === undefined && now - open.createdAt >= this.options.shardMaxAgeMs) {
        this.rolloverNow(stream);
      }
      await this.trim(stream, now - this.options.retentionMs);
      const expired = (closedAt?: number) => closedAt !== undefined && now - closedAt > this.options.retentionMs;
      const kept = stream.shards.filter((s) => s.entries.length > 0 || !expired(s.closedAt));
      if (kept.length !== stream.shards.length) {
        stream.shards = kept;
        await this.saveMeta(stream);
      }
      if (!stream.enabled && expired(stream.disabledAt) && kept.length === 0) {
        this.streams.delete(this.idOf(stream.arn));
        await this.db.batch([{ type: 'del', key: streamKey(stream.arn) }]);
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
      const { shards, ...meta } = stream;
      const value = { ...meta, shards: shards.map(({ entries: _, ...shard }) => shard) };
      return this.db.batch([...alongside, { type: 'put', key: streamKey(stream.arn), value }]);
    });
    this.metaWrites = write.catch(() => undefined);
    return write;
  }

  /** Waits for metadata writes in flight (before the database closes). */
  flush() {
    return this.metaWrites;
  }
}
