/** ARNs and stream records follow the region the client signs for. */
import { DescribeTableCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, ListStreamsCommand } from '@aws-sdk/client-dynamodb-streams';
import { describe, expect, inject, test } from 'vitest';
import { createTestTable, dynamoClient, readStream, streamsClient } from './support/aws.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';

// Against the embedded engine, a region other than its own; against another endpoint, the one it serves.
const region = inject('embeddedEngine') ? 'eu-west-2' : (process.env.AWS_REGION ?? 'us-east-1');
const inRegion = (arn: string | undefined) => arn?.startsWith(`arn:aws:dynamodb:${region}:`);

test('table, index and stream ARNs and stream records carry the region the client signed for', async () => {
  const client = dynamoClient({ region, maxAttempts: 1 });
  const streams = streamsClient({ region, maxAttempts: 1 });
  const { name, streamArn } = await createTestTable(client, {
    attributes: [{ AttributeName: 'gk', AttributeType: 'S' }],
    indexes: [{ IndexName: 'byG', KeySchema: [{ AttributeName: 'gk', KeyType: 'HASH' }], Projection: { ProjectionType: 'KEYS_ONLY' } }],
  });
  expect(inRegion(streamArn)).toBe(true);
  const { Table } = await client.send(new DescribeTableCommand({ TableName: name }));
  expect(inRegion(Table?.TableArn)).toBe(true);
  expect(inRegion(Table?.LatestStreamArn)).toBe(true);
  expect(inRegion(Table?.GlobalSecondaryIndexes?.[0]?.IndexArn)).toBe(true);

  const { Streams } = await streams.send(new ListStreamsCommand({ TableName: name }));
  expect(Streams?.map((s) => s.StreamArn)).toEqual([streamArn]);
  const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
  expect(StreamDescription?.StreamArn).toBe(streamArn);

  await client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: 's' } } }));
  const records = await readStream(streams, streamArn as string, (all) => all.length >= 1);
  expect(records.map((r) => r.awsRegion)).toEqual([region]);
});

describe.skipIf(onlyEmbedded)('one namespace, answered in each client region', () => {
  test('a client in another region sees the same table and stream, named in its region', async () => {
    const first = dynamoClient({ region: 'eu-west-2', maxAttempts: 1 });
    const { name, streamArn } = await createTestTable(first);
    await first.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: 's' } } }));

    const other = dynamoClient({ region: 'ap-south-1', maxAttempts: 1 });
    const { Table } = await other.send(new DescribeTableCommand({ TableName: name }));
    expect(Table?.TableArn).toMatch(/^arn:aws:dynamodb:ap-south-1:\d+:table\//);
    expect(Table?.LatestStreamArn).toBe(streamArn?.replace(':eu-west-2:', ':ap-south-1:'));
    // Either name of the stream reaches it.
    const records = await readStream(streamsClient({ region: 'ap-south-1' }), streamArn as string, (all) => all.length >= 1);
    expect(records[0]?.awsRegion).toBe('ap-south-1');
  });

  test('in-process calls are answered in the engine region', async () => {
    const { engine, client } = await ownEngine({ region: 'sa-east-1' });
    try {
      const { name } = await createTestTable(client);
      const { status, body } = await engine.answer('DynamoDB_20120810.DescribeTable', JSON.stringify({ TableName: name }));
      expect(status).toBe(200);
      expect(JSON.parse(body).Table.TableArn).toMatch(/^arn:aws:dynamodb:sa-east-1:/);
      const other = await engine.answer('DynamoDB_20120810.DescribeTable', JSON.stringify({ TableName: name }), 'us-west-2');
      expect(JSON.parse(other.body).Table.TableArn).toMatch(/^arn:aws:dynamodb:us-west-2:/);
    } finally {
      await engine.close();
    }
  });
});
