/**
 * Where the stream log lives in the engine's LevelDB, next to dynalite's tables and items.
 * Records of a stream sort by sequence number, so a shard's records are one key range.
 */
import type { KeySchemaElement } from '../dynalite.ts';
import type { StreamRecord, ViewType } from './records.ts';

/** Sequence numbers are padded to this many digits in keys (and on the wire, as DynamoDB Streams requires). */
const SEQ_DIGITS = 21;
const pad = (seq: number) => String(seq).padStart(SEQ_DIGITS, '0');

export const streamPrefix = 'rp-stream~';
export const shardPrefix = 'rp-shard~';
export const streamKey = (arn: string) => `${streamPrefix}${arn}`;
export const shardKey = (arn: string, startSeq: number) => `${shardPrefix}${arn}~${pad(startSeq)}`;
export const recordPrefix = (arn: string) => `rp-srec~${arn}~`;
export const recordKey = (arn: string, seq: number) => `${recordPrefix(arn)}${pad(seq)}`;
/** Just past every record of the stream. */
export const recordsEnd = (arn: string) => `${recordPrefix(arn)}\xff`;

/** A stream as written: what is not derived from its shards and records. */
export interface StoredStream {
  arn: string;
  label: string;
  tableName: string;
  keySchema: KeySchemaElement[];
  viewType: ViewType;
  createdAt: number;
  enabled: boolean;
  disabledAt?: number;
  /** The last sequence number of a disabled stream (its last shard ends there). */
  endSeq?: number;
  /** Iterators issued before this epoch are expired (fault injection). */
  iteratorEpoch: number;
  /** Highest sequence number removed by trimming (0: nothing trimmed). */
  trimmedThrough: number;
}

/** A shard as written, once: where it ends and when it closed follow from the next shard (or the disabled stream). */
export interface StoredShard {
  arn: string;
  shardId: string;
  parentShardId?: string;
  createdAt: number;
  startSeq: number;
}

export interface StoredRecord {
  seq: number;
  /** Its place in its shard, from 0 (absent in records written before it was kept). */
  n?: number;
  createdAt: number;
  record: StreamRecord;
}
