/** The stream log as it is held in memory: streams and their shards (their records are on disk). */
import type { StoredShard, StoredStream } from './keys.ts';

export interface Shard extends Omit<StoredShard, 'arn'> {
  /** Set once the shard is closed: its last sequence number (its child starts right after). */
  endSeq?: number;
  closedAt?: number;
  /** Records numbered in it so far (for rollover by count). */
  count: number;
  /** Whether its definition has landed on disk; until then every batch with one of its records carries it. */
  saved: boolean;
}

export interface Stream extends StoredStream {
  shards: Shard[];
  /** The highest sequence number given to a record of this stream. */
  lastSeq: number;
  /** Sequence numbers whose batch is in flight, ascending: readers see nothing from the first on. */
  pending: number[];
}

/** Below this every record of the stream has landed or failed: readers go no further. */
export const horizonOf = (stream: Stream) => (stream.pending.length > 0 ? (stream.pending[0] as number) - 1 : stream.lastSeq);

/** A shard ends where its child starts; the last one of a disabled stream where the stream ended. */
export function closeDerived(stream: Stream) {
  stream.shards.forEach((shard, i) => {
    const child = stream.shards[i + 1];
    if (child) Object.assign(shard, { endSeq: child.startSeq - 1, closedAt: child.createdAt });
    else if (!stream.enabled) Object.assign(shard, { endSeq: stream.endSeq ?? stream.lastSeq, closedAt: stream.disabledAt });
  });
}
