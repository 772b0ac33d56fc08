/** AWS SDK clients and table helpers for tests, pointed at the test run's endpoint. */
import { randomBytes } from 'node:crypto';
import {
  type AttributeDefinition,
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  type GlobalSecondaryIndex,
  type StreamViewType,
} from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { inject } from 'vitest';
import { waitFor } from './wait.ts';

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

export interface ClientOptions {
  endpoint?: string;
  /** 1 turns off the SDK's retries, so an injected error reaches the test. */
  maxAttempts?: number;
  /** The region to sign for (default AWS_REGION, else us-east-1). */
  region?: string;
}

export function dynamoClient(options: ClientOptions = {}) {
  return new DynamoDBClient({
    endpoint: options.endpoint ?? inject('dynamodbEndpoint'),
    region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    credentials,
    maxAttempts: options.maxAttempts ?? 3,
  });
}

export function streamsClient(options: ClientOptions = {}) {
  return new DynamoDBStreamsClient({
    endpoint: options.endpoint ?? inject('dynamodbEndpoint'),
    region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    credentials,
    maxAttempts: options.maxAttempts ?? 3,
  });
}

export const uniqueName = (prefix = 'test') => `${prefix}-${randomBytes(5).toString('hex')}`;

export interface TestTableOptions {
  name?: string;
  stream?: StreamViewType | false;
  indexes?: GlobalSecondaryIndex[];
  attributes?: AttributeDefinition[];
}

/** Creates a pk/sk table (with a stream unless told otherwise) and waits until it is ACTIVE. */
export async function createTestTable(client: DynamoDBClient, options: TestTableOptions = {}) {
  const name = options.name ?? uniqueName();
  const stream = options.stream ?? 'NEW_AND_OLD_IMAGES';
  const result = await client.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
        ...(options.attributes ?? []),
      ],
      GlobalSecondaryIndexes: options.indexes,
      StreamSpecification: stream ? { StreamEnabled: true, StreamViewType: stream } : undefined,
    }),
  );
  await waitFor(async () => (await client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus === 'ACTIVE', {
    timeoutMs: 120_000,
    what: `table ${name} to become ACTIVE`,
  });
  return { name, streamArn: result.TableDescription?.LatestStreamArn };
}

/**
 * Reads a stream from its oldest record, following shard lineage (a child only after its
 * parent is drained), until `until` holds for what was read.
 */
export async function readStream(
  streams: DynamoDBStreamsClient,
  streamArn: string,
  until: (records: _Record[]) => boolean,
  timeoutMs = 30_000,
) {
  const records: _Record[] = [];
  const drained = new Set<string>();
  const iterators = new Map<string, string | undefined>();
  await waitFor(
    async () => {
      const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
      for (const shard of StreamDescription?.Shards ?? []) {
        const id = shard.ShardId as string;
        if (drained.has(id)) continue;
        if (
          shard.ParentShardId &&
          !drained.has(shard.ParentShardId) &&
          StreamDescription?.Shards?.some((s) => s.ShardId === shard.ParentShardId)
        ) {
          continue;
        }
        let iterator = iterators.get(id);
        if (iterator === undefined) {
          iterator = (
            await streams.send(new GetShardIteratorCommand({ StreamArn: streamArn, ShardId: id, ShardIteratorType: 'TRIM_HORIZON' }))
          ).ShardIterator;
        }
        while (iterator) {
          const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
          records.push(...(page.Records ?? []));
          iterator = page.NextShardIterator;
          if (!page.Records?.length) break;
        }
        iterators.set(id, iterator);
        if (!iterator) drained.add(id);
      }
      return until(records);
    },
    { timeoutMs, intervalMs: 20, what: 'stream records' },
  );
  return records;
}
