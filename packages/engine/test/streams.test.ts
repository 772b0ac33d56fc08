import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  UpdateTableCommand,
} from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListStreamsCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient, readStream, streamsClient, uniqueName } from './support/aws.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const client = dynamoClient({ maxAttempts: 1 });
const streams = streamsClient({ maxAttempts: 1 });

const key = (pk: string, sk = 'a') => ({ pk: { S: pk }, sk: { S: sk } });
const ofPartition = (pk: string) => (records: _Record[]) => records.filter((r) => r.dynamodb?.Keys?.pk?.S === pk);

describe('a table with a NEW_AND_OLD_IMAGES stream', () => {
  let table: string;
  let arn: string;
  beforeAll(async () => {
    const created = await createTestTable(client);
    table = created.name;
    arn = created.streamArn as string;
  });

  test('the table reports its stream', async () => {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
    expect(Table?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' });
    expect(Table?.LatestStreamArn).toBe(arn);
    expect(arn).toContain(`table/${table}/stream/`);
    const { Streams } = await streams.send(new ListStreamsCommand({ TableName: table }));
    expect(Streams).toEqual([{ StreamArn: arn, TableName: table, StreamLabel: Table?.LatestStreamLabel }]);
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: arn }));
    expect(StreamDescription).toMatchObject({ StreamStatus: 'ENABLED', StreamViewType: 'NEW_AND_OLD_IMAGES', TableName: table });
    expect(StreamDescription?.KeySchema).toEqual([
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    expect(StreamDescription?.Shards?.length).toBeGreaterThan(0);
  });

  test('every kind of write produces one record, in commit order, with the right images', async () => {
    const pk = uniqueName();
    const before = Math.floor(Date.now() / 1000) - 1;
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), v: { N: '1' } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), v: { N: '2' } } }));
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(pk),
        UpdateExpression: 'ADD v :one',
        ExpressionAttributeValues: { ':one': { N: '1' } },
      }),
    );
    await client.send(new DeleteItemCommand({ TableName: table, Key: key(pk) }));
    await client.send(
      new BatchWriteItemCommand({ RequestItems: { [table]: [{ PutRequest: { Item: { ...key(pk, 'b'), v: { N: '9' } } } }] } }),
    );
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: { ...key(pk, 'c'), v: { N: '5' } } } },
          { Delete: { TableName: table, Key: key(pk, 'b') } },
        ],
      }),
    );

    const records = ofPartition(pk)(await readStream(streams, arn, (all) => ofPartition(pk)(all).length >= 7));
    expect(records.map((r) => [r.eventName, r.dynamodb?.Keys?.sk?.S])).toEqual([
      ['INSERT', 'a'],
      ['MODIFY', 'a'],
      ['MODIFY', 'a'],
      ['REMOVE', 'a'],
      ['INSERT', 'b'],
      ['INSERT', 'c'],
      ['REMOVE', 'b'],
    ]);
    const images = records.map((r) => [r.dynamodb?.OldImage?.v?.N, r.dynamodb?.NewImage?.v?.N]);
    expect(images).toEqual([
      [undefined, '1'],
      ['1', '2'],
      ['2', '3'],
      ['3', undefined],
      [undefined, '9'],
      [undefined, '5'],
      ['9', undefined],
    ]);
    const seqs = records.map((r) => BigInt(r.dynamodb?.SequenceNumber as string));
    expect([...seqs].sort((a, b) => (a < b ? -1 : 1))).toEqual(seqs);
    expect(new Set(seqs).size).toBe(seqs.length);
    // Event ids as DynamoDB's: 32 hex digits, one per record.
    expect(new Set(records.map((r) => r.eventID)).size).toBe(records.length);
    for (const record of records) {
      expect(record.eventID).toMatch(/^[0-9a-f]{32}$/);
      expect(record).toMatchObject({ eventSource: 'aws:dynamodb', eventVersion: '1.1' });
      expect(record.dynamodb?.SequenceNumber?.length).toBeGreaterThanOrEqual(21);
      expect(record.dynamodb?.SizeBytes).toBeGreaterThan(0);
      expect(record.dynamodb?.StreamViewType).toBe('NEW_AND_OLD_IMAGES');
      expect(record.dynamodb?.ApproximateCreationDateTime?.getTime()).toBeGreaterThanOrEqual(before * 1000);
      expect(record.userIdentity).toBeUndefined();
    }
  });

  test('a write that changes nothing produces no record', async () => {
    const pk = uniqueName();
    const item = { ...key(pk), v: { N: '1' }, tags: { SS: ['x', 'y'] } };
    await client.send(new PutItemCommand({ TableName: table, Item: item }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...item, tags: { SS: ['y', 'x'] } } }));
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key(pk),
        UpdateExpression: 'SET v = :v',
        ExpressionAttributeValues: { ':v': { N: '1' } },
      }),
    );
    await client.send(new DeleteItemCommand({ TableName: table, Key: key(pk, 'never-existed') }));
    // A marker written after the no-ops: once it is read, the no-ops would have been too.
    await client.send(new PutItemCommand({ TableName: table, Item: key(pk, 'marker') }));
    const records = ofPartition(pk)(
      await readStream(streams, arn, (all) => ofPartition(pk)(all).some((r) => r.dynamodb?.Keys?.sk?.S === 'marker')),
    );
    expect(records.map((r) => [r.eventName, r.dynamodb?.Keys?.sk?.S])).toEqual([
      ['INSERT', 'a'],
      ['INSERT', 'marker'],
    ]);
  });

  test('shard iterators: TRIM_HORIZON, LATEST, AT_ and AFTER_SEQUENCE_NUMBER, Limit and NextShardIterator', async () => {
    const pk = uniqueName();
    for (const sk of ['1', '2', '3']) await client.send(new PutItemCommand({ TableName: table, Item: key(pk, sk) }));
    const mine = ofPartition(pk)(await readStream(streams, arn, (all) => ofPartition(pk)(all).length >= 3));
    const second = mine[1]?.dynamodb?.SequenceNumber as string;
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: arn }));
    const shard = StreamDescription?.Shards?.find((s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined);
    const shardId = shard?.ShardId as string;
    const iterator = async (type: 'AT_SEQUENCE_NUMBER' | 'AFTER_SEQUENCE_NUMBER' | 'LATEST', seq?: string) =>
      (await streams.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shardId, ShardIteratorType: type, SequenceNumber: seq })))
        .ShardIterator as string;

    const at = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator('AT_SEQUENCE_NUMBER', second), Limit: 1 }));
    expect(at.Records?.map((r) => r.dynamodb?.Keys?.sk?.S)).toEqual(['2']);
    expect(at.NextShardIterator).toBeTruthy();
    const next = await streams.send(new GetRecordsCommand({ ShardIterator: at.NextShardIterator }));
    expect(next.Records?.[0]?.dynamodb?.Keys?.sk?.S).toBe('3');

    const after = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator('AFTER_SEQUENCE_NUMBER', second) }));
    expect(after.Records?.[0]?.dynamodb?.Keys?.sk?.S).toBe('3');

    const latest = await iterator('LATEST');
    await client.send(new PutItemCommand({ TableName: table, Item: key(pk, '4') }));
    let fromLatest: _Record[] = [];
    let position: string | undefined = latest;
    await waitFor(async () => {
      const page = await streams.send(new GetRecordsCommand({ ShardIterator: position }));
      fromLatest = fromLatest.concat(page.Records ?? []);
      position = page.NextShardIterator;
      return ofPartition(pk)(fromLatest).length > 0;
    });
    expect(ofPartition(pk)(fromLatest).map((r) => r.dynamodb?.Keys?.sk?.S)).toEqual(['4']);
  });

  test('Streams refusals carry DynamoDB error names', async () => {
    const unknownArn = `${arn.slice(0, arn.lastIndexOf('/'))}/2000-01-01T00:00:00.000`;
    expect((await failure(streams.send(new DescribeStreamCommand({ StreamArn: unknownArn })))).name).toBe('ResourceNotFoundException');
    const limit = await failure(streams.send(new GetRecordsCommand({ ShardIterator: 'x'.repeat(40), Limit: 1001 })));
    expect(limit.name).toBe('ValidationException');
    expect(limit.message).toMatch(/limit.*less than or equal to 1000/);
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: arn }));
    const shardId = StreamDescription?.Shards?.[0]?.ShardId as string;
    const missingSeq = await failure(
      streams.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shardId, ShardIteratorType: 'AT_SEQUENCE_NUMBER' })),
    );
    expect(missingSeq.name).toBe('ValidationException');
    const missingShard = await failure(
      streams.send(
        new GetShardIteratorCommand({
          StreamArn: arn,
          ShardId: 'shardId-00000000000000000000-00000000',
          ShardIteratorType: 'TRIM_HORIZON',
        }),
      ),
    );
    expect(missingShard.name).toBe('ResourceNotFoundException');
  });
});

describe.each(['KEYS_ONLY', 'NEW_IMAGE', 'OLD_IMAGE', 'NEW_AND_OLD_IMAGES'] as const)('a %s stream', (viewType) => {
  test('carries the images its view type asks for', async () => {
    const { name, streamArn } = await createTestTable(client, { stream: viewType });
    const item = { ...key('p'), v: { N: '1' } };
    await client.send(new PutItemCommand({ TableName: name, Item: item }));
    await client.send(new PutItemCommand({ TableName: name, Item: { ...item, v: { N: '2' } } }));
    const [insert, modify] = await readStream(streams, streamArn as string, (all) => all.length >= 2);
    const wantsNew = viewType === 'NEW_IMAGE' || viewType === 'NEW_AND_OLD_IMAGES';
    const wantsOld = viewType === 'OLD_IMAGE' || viewType === 'NEW_AND_OLD_IMAGES';
    expect(insert?.dynamodb?.Keys).toEqual(key('p'));
    expect(insert?.dynamodb?.NewImage).toEqual(wantsNew ? item : undefined);
    expect(insert?.dynamodb?.OldImage).toBeUndefined();
    expect(modify?.dynamodb?.NewImage?.v).toEqual(wantsNew ? { N: '2' } : undefined);
    expect(modify?.dynamodb?.OldImage?.v).toEqual(wantsOld ? { N: '1' } : undefined);
    expect(modify?.dynamodb?.StreamViewType).toBe(viewType);
  });
});

test('UpdateTable turns a stream off and on; a new stream gets a new arn', async () => {
  const { name, streamArn } = await createTestTable(client, { stream: false });
  expect(streamArn).toBeUndefined();
  const on = await client.send(
    new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: true, StreamViewType: 'KEYS_ONLY' } }),
  );
  const first = on.TableDescription?.LatestStreamArn as string;
  expect(on.TableDescription?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'KEYS_ONLY' });
  const twice = await failure(
    client.send(new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: true, StreamViewType: 'KEYS_ONLY' } })),
  );
  expect(twice.name).toBe('ValidationException');

  await waitFor(async () => (await client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus === 'ACTIVE', {
    timeoutMs: 120_000,
  });
  await client.send(new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: false } }));
  await waitFor(
    async () => (await streams.send(new DescribeStreamCommand({ StreamArn: first }))).StreamDescription?.StreamStatus === 'DISABLED',
    { timeoutMs: 120_000 },
  );
  await waitFor(async () => (await client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus === 'ACTIVE', {
    timeoutMs: 120_000,
  });
  const again = await client.send(
    new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' } }),
  );
  expect(again.TableDescription?.LatestStreamArn).not.toBe(first);
  const { Streams } = await streams.send(new ListStreamsCommand({ TableName: name }));
  expect(Streams?.map((s) => s.StreamArn)).toEqual(expect.arrayContaining([first, again.TableDescription?.LatestStreamArn]));
});
