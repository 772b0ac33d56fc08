/**
 * Reading the stream log back after a restart: stream and shard definitions, and of the
 * records only the last one of each stream (where numbering goes on). The time this takes
 * does not grow with the number of records kept.
 *
 * Data written before shards had keys of their own (the shards inside the stream's value,
 * records without their place in the shard) is rewritten to the current layout on the way.
 */
import type { LevelOp, MainDb } from '../dynalite.ts';
import {
  recordKey,
  recordPrefix,
  recordsEnd,
  type StoredRecord,
  type StoredShard,
  type StoredStream,
  shardKey,
  shardPrefix,
  streamKey,
  streamPrefix,
} from './keys.ts';
import { closeDerived, type Stream } from './model.ts';

/** A stream's value as written before shards had keys of their own. */
interface EarlierStream extends Omit<StoredStream, 'trimmedThrough'> {
  shards: (Omit<StoredShard, 'arn'> & { endSeq?: number; trimmedThrough: number })[];
}

/** The streams, and how many record values it took to read them (one per stream with records). */
export async function loadStreams(db: MainDb): Promise<{ streams: Stream[]; recordsRead: number }> {
  const streams = new Map<string, Stream>();
  const rewrites: LevelOp[] = [];
  for await (const value of db.values({ gte: streamPrefix, lt: `${streamPrefix}\xff` })) {
    const stream = 'shards' in (value as object) ? upgrade(value as EarlierStream, rewrites) : (value as StoredStream);
    streams.set(stream.arn, { ...stream, shards: [], lastSeq: 0, pending: [] });
  }
  if (rewrites.length > 0) await db.batch(rewrites);
  for await (const value of db.values({ gte: shardPrefix, lt: `${shardPrefix}\xff` })) {
    const { arn, ...shard } = value as StoredShard;
    // Keys sort by start, so shards arrive in order.
    streams.get(arn)?.shards.push({ ...shard, count: 0, saved: true });
  }
  let recordsRead = 0;
  for (const stream of streams.values()) {
    recordsRead += await readLastRecord(db, stream);
    closeDerived(stream);
  }
  return { streams: [...streams.values()], recordsRead };
}

/** Where numbering goes on: the stream's last record, and how many its shard holds. */
async function readLastRecord(db: MainDb, stream: Stream) {
  for await (const value of db.values({ gte: recordPrefix(stream.arn), lt: recordsEnd(stream.arn), reverse: true, limit: 1 })) {
    const last = value as StoredRecord;
    stream.lastSeq = last.seq;
    const shard = stream.shards.findLast((s) => s.startSeq < last.seq);
    // Records written before their place was kept: count the shard's keys (once; later records carry it).
    if (shard) shard.count = last.n !== undefined ? last.n + 1 : await countRecords(db, stream.arn, shard.startSeq);
    return 1;
  }
  return 0;
}

async function countRecords(db: MainDb, arn: string, startSeq: number) {
  let count = 0;
  for await (const _ of db.keys({ gt: recordKey(arn, startSeq), lt: recordsEnd(arn) })) count++;
  return count;
}

/** The earlier layout: shards written inside the stream, each with its own trim horizon. */
function upgrade(earlier: EarlierStream, rewrites: LevelOp[]): StoredStream {
  const { shards, ...rest } = earlier;
  const last = shards.at(-1);
  const stream: StoredStream = {
    ...rest,
    trimmedThrough: Math.max(0, ...shards.map((s) => s.trimmedThrough)),
    ...(!earlier.enabled && last?.endSeq !== undefined ? { endSeq: last.endSeq } : {}),
  };
  for (const { shardId, parentShardId, createdAt, startSeq } of shards) {
    const shard: StoredShard = { arn: stream.arn, shardId, createdAt, startSeq, ...(parentShardId ? { parentShardId } : {}) };
    rewrites.push({ type: 'put', key: shardKey(stream.arn, startSeq), value: shard });
  }
  rewrites.push({ type: 'put', key: streamKey(stream.arn), value: stream });
  return stream;
}
