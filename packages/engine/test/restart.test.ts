/** An on-disk engine keeps items, stream records and settings across a restart. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DeleteItemCommand,
  DescribeTimeToLiveCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, expect, test } from 'vitest';
import { startEngine } from '../src/index.ts';
import { createTestTable, readStream } from './support/aws.ts';
import { ownEngine } from './support/engine.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'runplane-engine-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const key = (sk: string) => ({ pk: { S: 'p' }, sk: { S: sk } });

test('items and stream records written before a restart are there after it', async () => {
  const first = await ownEngine({ dataDir });
  const { name, streamArn } = await createTestTable(first.client);
  const arn = streamArn as string;
  await first.client.send(
    new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: 'ttl' } }),
  );
  await first.client.send(new PutItemCommand({ TableName: name, Item: { ...key('a'), v: { N: '1' } } }));
  await first.client.send(
    new UpdateItemCommand({
      TableName: name,
      Key: key('a'),
      UpdateExpression: 'ADD v :one',
      ExpressionAttributeValues: { ':one': { N: '1' } },
    }),
  );
  await first.client.send(new PutItemCommand({ TableName: name, Item: key('b') }));
  await first.client.send(new DeleteItemCommand({ TableName: name, Key: key('b') }));
  await first.client.send(
    new TransactWriteItemsCommand({
      TransactItems: [{ Put: { TableName: name, Item: key('c') } }, { Put: { TableName: name, Item: key('d') } }],
    }),
  );
  first.engine.control.rolloverShard(name);
  await first.client.send(new PutItemCommand({ TableName: name, Item: key('e') }));
  const before = await readStream(first.streams, arn, (all) => all.length >= 7);
  await first.engine.close();

  // The same folder cannot be opened twice at once.
  const second = await ownEngine({ dataDir });
  await expect(startEngine({ dataDir })).rejects.toThrow(/in use by another process/);
  try {
    const { Items } = await second.client.send(
      new QueryCommand({ TableName: name, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'p' } } }),
    );
    expect(Items).toEqual([{ ...key('a'), v: { N: '2' } }, key('c'), key('d'), key('e')]);
    const after = await readStream(second.streams, arn, (all) => all.length >= 7);
    expect(after).toEqual(before);
    expect((await second.client.send(new DescribeTimeToLiveCommand({ TableName: name }))).TimeToLiveDescription).toEqual({
      TimeToLiveStatus: 'ENABLED',
      AttributeName: 'ttl',
    });

    // Sequence numbers keep growing after the restart.
    await second.client.send(new PutItemCommand({ TableName: name, Item: key('f') }));
    const all = await readStream(second.streams, arn, (records) => records.length >= 8);
    const seqs = all.map((r) => BigInt(r.dynamodb?.SequenceNumber as string));
    expect(seqs.every((seq, i) => i === 0 || seq > (seqs[i - 1] as bigint))).toBe(true);
    expect(all.at(-1)?.dynamodb?.Keys?.sk).toEqual({ S: 'f' });
  } finally {
    await second.engine.close();
  }
});
