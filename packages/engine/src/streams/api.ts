/** The DynamoDB Streams API (DynamoDBStreams_20120810.*) over the stream log. */
import { validateWith } from '../dynalite.ts';
import { errors } from '../errors.ts';
import { inRegion } from '../region.ts';
import type { RequestContext } from '../request-context.ts';
import type { Stream, StreamLog } from './log.ts';
import { formatSeq } from './records.ts';

export interface StreamsApiOptions {
  /** How long a shard iterator stays valid (DynamoDB: 15 minutes). */
  iteratorTtlMs: number;
}

const arnSpec = { type: 'String', lengthGreaterThanOrEqual: 37, lengthLessThanOrEqual: 1024 };
const shardIdSpec = { type: 'String', lengthGreaterThanOrEqual: 28, lengthLessThanOrEqual: 65 };
const specs = {
  ListStreams: {
    types: {
      TableName: { type: 'String', regex: '[a-zA-Z0-9_.-]+', lengthGreaterThanOrEqual: 3, lengthLessThanOrEqual: 255 },
      Limit: { type: 'Integer', greaterThanOrEqual: 1, lessThanOrEqual: 100 },
      ExclusiveStartStreamArn: arnSpec,
    },
  },
  DescribeStream: {
    types: {
      StreamArn: { ...arnSpec, notNull: true },
      Limit: { type: 'Integer', greaterThanOrEqual: 1, lessThanOrEqual: 100 },
      ExclusiveStartShardId: shardIdSpec,
    },
  },
  GetShardIterator: {
    types: {
      StreamArn: { ...arnSpec, notNull: true },
      ShardId: { ...shardIdSpec, notNull: true },
      ShardIteratorType: {
        type: 'String',
        notNull: true,
        enum: ['TRIM_HORIZON', 'LATEST', 'AT_SEQUENCE_NUMBER', 'AFTER_SEQUENCE_NUMBER'],
      },
      SequenceNumber: { type: 'String', lengthGreaterThanOrEqual: 21, lengthLessThanOrEqual: 40 },
    },
  },
  GetRecords: {
    types: {
      ShardIterator: { type: 'String', notNull: true, lengthGreaterThanOrEqual: 1, lengthLessThanOrEqual: 2048 },
      Limit: { type: 'Integer', greaterThanOrEqual: 1, lessThanOrEqual: 1000 },
    },
  },
};

export type StreamsOperation = keyof typeof specs;
export const streamsOperations = Object.keys(specs) as StreamsOperation[];

/** What an iterator encodes: records after `position` in one shard, as of `issuedAt`. */
interface IteratorState {
  arn: string;
  shardId: string;
  position: number;
  issuedAt: number;
  epoch: number;
}

export function createStreamsApi(log: StreamLog, now: () => number, options: StreamsApiOptions) {
  const findStream = (arn: string) => {
    const stream = log.get(arn);
    if (!stream) throw errors.resourceNotFound(`Requested resource not found: Stream: ${arn} not found`);
    return stream;
  };
  const findShard = (stream: Stream, shardId: string) => {
    const shard = stream.shards.find((s) => s.shardId === shardId);
    if (!shard) throw errors.resourceNotFound(`Requested resource not found: Shard: ${shardId} in Stream: ${stream.arn} not found`);
    return shard;
  };
  const encode = (state: IteratorState) => Buffer.from(JSON.stringify(state)).toString('base64url');
  const decode = (iterator: string): IteratorState => {
    try {
      const state = JSON.parse(Buffer.from(iterator, 'base64url').toString());
      if (typeof state.arn === 'string' && typeof state.shardId === 'string' && Number.isSafeInteger(state.position)) return state;
    } catch {}
    throw errors.validation('Invalid ShardIterator');
  };

  const operations = {
    ListStreams(data: Record<string, unknown>, { region }: RequestContext) {
      let streams = log.list(data.TableName as string | undefined);
      if (data.ExclusiveStartStreamArn) {
        const start = log.get(data.ExclusiveStartStreamArn as string);
        const at = start ? streams.indexOf(start) : -1;
        streams = at < 0 ? [] : streams.slice(at + 1);
      }
      const limit = (data.Limit as number | undefined) ?? 100;
      const page = streams.slice(0, limit);
      const last = page.at(-1);
      return {
        Streams: page.map((s) => ({ StreamArn: inRegion(s.arn, region), TableName: s.tableName, StreamLabel: s.label })),
        ...(streams.length > limit && last ? { LastEvaluatedStreamArn: inRegion(last.arn, region) } : {}),
      };
    },

    DescribeStream(data: Record<string, unknown>, { region }: RequestContext) {
      const stream = findStream(data.StreamArn as string);
      let shards = stream.shards;
      if (data.ExclusiveStartShardId) {
        const at = shards.findIndex((s) => s.shardId === data.ExclusiveStartShardId);
        shards = at < 0 ? [] : shards.slice(at + 1);
      }
      const limit = (data.Limit as number | undefined) ?? 100;
      const page = shards.slice(0, limit);
      return {
        StreamDescription: {
          StreamArn: inRegion(stream.arn, region),
          StreamLabel: stream.label,
          StreamStatus: stream.enabled ? 'ENABLED' : 'DISABLED',
          StreamViewType: stream.viewType,
          CreationRequestDateTime: stream.createdAt / 1000,
          TableName: stream.tableName,
          KeySchema: stream.keySchema,
          Shards: page.map((s) => ({
            ShardId: s.shardId,
            ...(s.parentShardId ? { ParentShardId: s.parentShardId } : {}),
            SequenceNumberRange: {
              StartingSequenceNumber: formatSeq(s.startSeq),
              ...(s.endSeq !== undefined ? { EndingSequenceNumber: formatSeq(s.endSeq) } : {}),
            },
          })),
          ...(shards.length > limit ? { LastEvaluatedShardId: page.at(-1)?.shardId } : {}),
        },
      };
    },

    GetShardIterator(data: Record<string, unknown>) {
      const stream = findStream(data.StreamArn as string);
      const shard = findShard(stream, data.ShardId as string);
      const type = data.ShardIteratorType as string;
      const trimmed = log.trimmedIn(stream, shard);
      const horizon = Math.max(trimmed, shard.startSeq);
      let position: number;
      if (type === 'TRIM_HORIZON') {
        position = horizon;
      } else if (type === 'LATEST') {
        position = Math.max(horizon, Math.min(log.horizon(stream), shard.endSeq ?? Number.POSITIVE_INFINITY));
      } else {
        const seq = parseSeq(data.SequenceNumber, type);
        if (seq < shard.startSeq || (shard.endSeq !== undefined && seq > shard.endSeq)) {
          throw errors.validation(
            `Invalid SequenceNumber ${data.SequenceNumber} for shard ${shard.shardId}: ` +
              `it is outside the shard's range (${formatSeq(shard.startSeq)} to ${shard.endSeq !== undefined ? formatSeq(shard.endSeq) : 'open'})`,
          );
        }
        position = Math.max(type === 'AT_SEQUENCE_NUMBER' ? seq - 1 : seq, shard.startSeq);
        if (position < trimmed) {
          throw errors.trimmedDataAccess(
            `The sequence number ${data.SequenceNumber} is older than the trim horizon of shard ${shard.shardId}`,
          );
        }
      }
      return { ShardIterator: encode({ arn: stream.arn, shardId: shard.shardId, position, issuedAt: now(), epoch: stream.iteratorEpoch }) };
    },

    async GetRecords(data: Record<string, unknown>, { region }: RequestContext) {
      const state = decode(data.ShardIterator as string);
      const stream = findStream(state.arn);
      const shard = findShard(stream, state.shardId);
      const at = now();
      if (at - state.issuedAt > options.iteratorTtlMs || state.epoch < stream.iteratorEpoch) {
        throw errors.expiredIterator(
          `Iterator expired. The iterator was created at time ${new Date(state.issuedAt).toUTCString()} while right now it is ` +
            `${new Date(at).toUTCString()} which is further in the future than the tolerated delay of ${options.iteratorTtlMs} milliseconds.`,
        );
      }
      if (state.position < log.trimmedIn(stream, shard)) {
        throw errors.trimmedDataAccess('The operation attempted to read past the oldest stream record in a shard.');
      }
      const { records, drained } = await log.read(stream, shard, state.position, (data.Limit as number | undefined) ?? 1000);
      const position = records.at(-1)?.seq ?? state.position;
      return {
        // Records are kept in the engine's region; the client reads them in its own.
        Records: records.map(({ record }) => (record.awsRegion === region ? record : { ...record, awsRegion: region })),
        ...(drained ? {} : { NextShardIterator: encode({ ...state, position, issuedAt: at }) }),
      };
    },
  };

  return {
    /** Validates and runs one Streams operation. */
    handle(operation: StreamsOperation, body: Record<string, unknown>, context: RequestContext) {
      const data = validateWith(specs[operation], body, undefined);
      return operations[operation](data, context);
    },
  };
}

function parseSeq(value: unknown, type: string) {
  if (typeof value !== 'string') throw errors.validation(`SequenceNumber is required when ShardIteratorType is ${type}`);
  if (!/^\d+$/.test(value)) throw errors.validation(`Invalid SequenceNumber ${value}: it must be a decimal number`);
  const seq = Number(value);
  if (!Number.isSafeInteger(seq)) throw errors.validation(`Invalid SequenceNumber ${value}: no record of this stream has it`);
  return seq;
}
