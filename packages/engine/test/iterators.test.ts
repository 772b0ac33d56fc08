/**
 * Every Query and Scan reads through a LevelDB iterator, which must be closed when the read is
 * done: an open one stays registered with the database and holds a snapshot of it, so a server
 * answering reads for weeks would grow without bound. The engine counts what is open.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchWriteItemCommand, type DynamoDBClient, QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, test } from 'vitest';
import type { Engine, EngineOptions } from '../src/index.ts';
import { createTestTable } from './support/aws.ts';
import { ownEngine } from './support/engine.ts';
import { waitFor } from './support/wait.ts';

const leftovers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

async function tableOf(options: EngineOptions, items: number) {
  const setup = await ownEngine(options);
  leftovers.push(() => setup.engine.close());
  const { name } = await createTestTable(setup.client, {
    attributes: [{ AttributeName: 'kind', AttributeType: 'S' }],
    indexes: [{ IndexName: 'byKind', KeySchema: [{ AttributeName: 'kind', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } }],
  });
  for (let first = 0; first < items; first += 25) {
    const puts = Array.from({ length: Math.min(25, items - first) }, (_, j) => ({
      PutRequest: { Item: { pk: { S: 'p' }, sk: { S: `s${String(first + j).padStart(4, '0')}` }, kind: { S: 'k' } } },
    }));
    await setup.client.send(new BatchWriteItemCommand({ RequestItems: { [name]: puts } }));
  }
  return { ...setup, table: name };
}

/** Every way a read can end: at a Limit, at the end of the data, page by page, on an index, as a Scan. */
async function readEveryWay(client: DynamoDBClient, table: string) {
  const byKey = { KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'p' } } };
  await client.send(new QueryCommand({ TableName: table, ...byKey, Limit: 5 }));
  await client.send(new QueryCommand({ TableName: table, ...byKey }));
  await client.send(new QueryCommand({ TableName: table, ...byKey, ScanIndexForward: false, Limit: 3 }));
  let start: QueryCommand['input']['ExclusiveStartKey'];
  do {
    start = (await client.send(new QueryCommand({ TableName: table, ...byKey, Limit: 7, ExclusiveStartKey: start }))).LastEvaluatedKey;
  } while (start);
  await client.send(
    new QueryCommand({
      TableName: table,
      IndexName: 'byKind',
      KeyConditionExpression: 'kind = :k',
      ExpressionAttributeValues: { ':k': { S: 'k' } },
      Limit: 4,
    }),
  );
  await client.send(new ScanCommand({ TableName: table, Limit: 3 }));
  await client.send(new ScanCommand({ TableName: table }));
}

const openIterators = (engine: Engine) => engine.stats().iterators.open;

describe.each([
  ['in memory', () => ({})],
  [
    'on disk',
    () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'runplane-iterators-'));
      leftovers.push(() => rmSync(dataDir, { recursive: true, force: true }));
      return { dataDir };
    },
  ],
])('LevelDB iterators, %s', (_where, options) => {
  test('each read closes its iterator, however it ended: none stay open after 20 rounds of every kind', async () => {
    const { engine, client, table } = await tableOf(options(), 60);
    for (let round = 0; round < 20; round++) await readEveryWay(client, table);
    // Closing is asynchronous: wait for it, however slow the machine.
    await waitFor(() => openIterators(engine) === 0, { timeoutMs: 60_000, what: 'every iterator closed' });
    expect(openIterators(engine)).toBe(0);
  });
});
