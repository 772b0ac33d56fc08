/** The shards of a table's stream, as the poller keeps them: lineage, position, pace and failures. */
import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetShardIteratorCommand,
  type Shard,
  type ShardIteratorType,
} from '@aws-sdk/client-dynamodb-streams';

export interface ShardReader {
  id: string;
  /** GetRecords calls started, and the last one that came back with less than a full page. */
  calls: number;
  lastQuietCall: number;
  /** When the last GetRecords started (kept across read loops: the 5-a-second limit is per shard). */
  lastCall: number;
  /** Failures in a row, also across read loops (back-off grows until a call succeeds). */
  failures: number;
  /**
   * The iterator was lost before any record was read, so it re-opens at LATEST: whatever was
   * written in between is only in the table. Consumers are told to fill from it once re-opened.
   */
  resyncOnOpen?: boolean;
  parentId?: string;
  /** Closed when listed (it will end; a child follows it). */
  closed: boolean;
  state: 'waiting' | 'reading' | 'drained';
  iterator?: string;
  /** Sequence number of the last record handed on. */
  lastSeq?: string;
  /** Where to open when there is no lastSeq. */
  start: ShardIteratorType;
}

/**
 * A shard met for the first time. At start, history comes from the table: closed shards are
 * skipped and open ones read from now. Shards that appear later are new: read whole, once
 * their parent is drained.
 */
export function newShard(shard: Shard, initial: boolean, claimed = false): ShardReader {
  const closed = shard.SequenceNumberRange?.EndingSequenceNumber !== undefined;
  return {
    closed,
    id: shard.ShardId as string,
    calls: 0,
    lastQuietCall: 0,
    lastCall: 0,
    failures: 0,
    parentId: shard.ParentShardId,
    // Shards read by lease: their lease rows say whether and where to read (streams/ownership.ts).
    state: claimed ? 'reading' : initial ? (closed ? 'drained' : 'reading') : 'waiting',
    start: initial ? 'LATEST' : 'TRIM_HORIZON',
  };
}

/** Every shard of a stream (DescribeStream pages through them). */
export async function listShards(streams: DynamoDBStreamsClient, streamArn: string, signal: AbortSignal) {
  const shards: Shard[] = [];
  let exclusiveStart: string | undefined;
  do {
    const { StreamDescription } = await streams.send(
      new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: exclusiveStart }),
      {
        abortSignal: signal,
      },
    );
    shards.push(...(StreamDescription?.Shards ?? []));
    exclusiveStart = StreamDescription?.LastEvaluatedShardId;
  } while (exclusiveStart);
  return shards;
}

/**
 * Takes the stream's current list into `known`: new shards added, vanished ones dropped
 * (telling `onLost` of any not read to its end), a waiting child started once its parent is
 * drained. @returns the shards to read now
 */
export function reconcileShards(
  known: Map<string, ShardReader>,
  listed: Shard[],
  initial: boolean,
  onLost: (reason: string) => void,
  claimed = false,
) {
  const seen = new Set<string>();
  for (const shard of listed) {
    const id = shard.ShardId as string;
    seen.add(id);
    if (!known.has(id)) known.set(id, newShard(shard, initial, claimed));
  }
  for (const [id, shard] of known) {
    if (seen.has(id)) continue;
    // Gone from the stream: drained ones were trimmed away; anything else was lost with it.
    known.delete(id);
    if (shard.state !== 'drained') onLost(`shard ${id} vanished from the stream`);
  }
  const reading: ShardReader[] = [];
  for (const shard of known.values()) {
    const parent = shard.parentId ? known.get(shard.parentId) : undefined;
    if (shard.state === 'waiting' && (!parent || parent.state === 'drained')) shard.state = 'reading';
    if (shard.state === 'reading') reading.push(shard);
  }
  return reading;
}

/** An iterator on the shard: after the last record handed on, or at its `start` when there is none. */
export async function openIterator(streams: DynamoDBStreamsClient, streamArn: string, shard: ShardReader, signal: AbortSignal) {
  const after = shard.lastSeq !== undefined;
  const { ShardIterator } = await streams.send(
    new GetShardIteratorCommand({
      StreamArn: streamArn,
      ShardId: shard.id,
      ShardIteratorType: after ? 'AFTER_SEQUENCE_NUMBER' : shard.start,
      SequenceNumber: shard.lastSeq,
    }),
    { abortSignal: signal },
  );
  if (!ShardIterator) throw new Error(`no iterator for ${shard.id}`);
  return ShardIterator;
}
