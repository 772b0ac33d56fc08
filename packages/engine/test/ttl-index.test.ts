/**
 * The TTL sweeper reads an index by expiry time: its work follows what expires, not the
 * table's size. Counters show what it touched; the clock is the test's own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BatchWriteItemCommand,
  DeleteTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, test } from 'vitest';
import { createStore, type LevelOp } from '../src/dynalite.ts';
import type { EngineOptions } from '../src/index.ts';
import { createTestTable } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';

const leftovers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

const clock = manualClock();
const seconds = () => Math.floor(clock.now() / 1000);

async function setUp(options: EngineOptions = {}) {
  const setup = await ownEngine({ now: clock.now, ttlSweepIntervalMs: 3_600_000, ...options });
  leftovers.push(() => setup.engine.close());
  const { name } = await createTestTable(setup.client, { stream: false });
  return { ...setup, table: name };
}

const setTtl = (client: DynamoDBClient, table: string, enabled: boolean) =>
  client.send(new UpdateTimeToLiveCommand({ TableName: table, TimeToLiveSpecification: { Enabled: enabled, AttributeName: 'expiresAt' } }));

/** Writes `count` items named `<prefix>-<i>`, expiring at `expiresAt` (epoch seconds) or never. */
async function putMany(client: DynamoDBClient, table: string, prefix: string, count: number, expiresAt?: number) {
  const requests: WriteRequest[] = Array.from({ length: count }, (_, i) => ({
    PutRequest: {
      Item: { pk: { S: prefix }, sk: { S: String(i).padStart(4, '0') }, ...(expiresAt ? { expiresAt: { N: String(expiresAt) } } : {}) },
    },
  }));
  for (let i = 0; i < requests.length; i += 25) {
    await client.send(new BatchWriteItemCommand({ RequestItems: { [table]: requests.slice(i, i + 25) } }));
  }
}

const countOf = async (client: DynamoDBClient, table: string) =>
  (await client.send(new ScanCommand({ TableName: table, Select: 'COUNT' }))).Count;

describe.skipIf(onlyEmbedded)('the TTL expiry index', () => {
  test('a sweep touches only the expired items, shown by its counter', async () => {
    const { engine, client, table } = await setUp();
    await setTtl(client, table, true);
    await putMany(client, table, 'later', 300, seconds() + 3600);
    await putMany(client, table, 'never', 200);
    await putMany(client, table, 'due', 3, seconds() - 10);
    expect(await engine.control.sweepTtl()).toBe(3);
    expect(engine.stats().ttl).toMatchObject({ itemsTouched: 3, itemsDeleted: 3 });
    expect(await countOf(client, table)).toBe(500);
    // Nothing more is due: a sweep touches nothing.
    expect(await engine.control.sweepTtl()).toBe(0);
    expect(engine.stats().ttl.itemsTouched).toBe(3);
  });

  test('a sweep goes through more due items than one batch holds (100)', async () => {
    const { engine, client, table } = await setUp();
    await setTtl(client, table, true);
    await putMany(client, table, 'due', 250, seconds() - 10);
    expect(await engine.control.sweepTtl()).toBe(250);
    expect(engine.stats().ttl.itemsTouched).toBe(250);
    expect(await countOf(client, table)).toBe(0);
  });

  test('an item renewed before the sweep is left alone, and not touched', async () => {
    const { engine, client, table } = await setUp();
    await setTtl(client, table, true);
    await putMany(client, table, 'renewed', 1, seconds() - 10);
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: 'renewed' }, sk: { S: '0000' } },
        UpdateExpression: 'SET expiresAt = :later',
        ExpressionAttributeValues: { ':later': { N: String(seconds() + 3600) } },
      }),
    );
    expect(await engine.control.sweepTtl()).toBe(0);
    expect(engine.stats().ttl.itemsTouched).toBe(0);
    clock.advance(3_601_000);
    expect(await engine.control.sweepTtl()).toBe(1);
  });

  test('items written before TTL was enabled are indexed, and swept like the others', async () => {
    const { engine, client, table } = await setUp();
    await putMany(client, table, 'before', 150, seconds() - 10);
    await putMany(client, table, 'kept', 150, seconds() + 3600);
    await setTtl(client, table, true);
    expect(await engine.control.sweepTtl()).toBe(150);
    expect(engine.stats().ttl).toMatchObject({ itemsIndexed: 300, itemsTouched: 150 });
  });

  test('disabling stops the deletes; enabling again indexes what is there', async () => {
    const { engine, client, table } = await setUp({ ttlUpdateIntervalMs: 0 });
    await setTtl(client, table, true);
    await putMany(client, table, 'due', 5, seconds() - 10);
    await setTtl(client, table, false);
    expect(await engine.control.sweepTtl()).toBe(0);
    await setTtl(client, table, true);
    expect(await engine.control.sweepTtl()).toBe(5);
  });

  test('deleting a table clears its index entries (more than one batch of them): a new table of that name inherits none', async () => {
    const { engine, client, table } = await setUp();
    await setTtl(client, table, true);
    await putMany(client, table, 'gone', 1_100, seconds() + 60);
    await client.send(new DeleteTableCommand({ TableName: table }));
    await createTestTable(client, { name: table, stream: false });
    await setTtl(client, table, true);
    clock.advance(61_000);
    expect(await engine.control.sweepTtl()).toBe(0);
    // Entries left behind would have been touched (and found stale).
    expect(engine.stats().ttl.itemsTouched).toBe(0);
  });

  test('the index is kept across a restart, and a table with TTL from before the index is indexed at start', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-ttl-index-'));
    leftovers.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await setUp({ dataDir });
    await setTtl(first.client, first.table, true);
    await putMany(first.client, first.table, 'due', 4, seconds() + 60);
    await first.engine.close();

    const second = await setUp({ dataDir });
    clock.advance(61_000);
    expect(await second.engine.control.sweepTtl()).toBe(4);
    expect(second.engine.stats().ttl.itemsIndexed).toBe(0);
    await putMany(second.client, first.table, 'older', 6, seconds() - 10);
    await second.engine.close();

    // As written before the index existed: a setting without `indexed`, no index entries.
    await forgetIndex(dataDir, first.table);
    const third = await setUp({ dataDir });
    expect(await third.engine.control.sweepTtl()).toBe(6);
    expect(third.engine.stats().ttl.itemsIndexed).toBe(6);
    const gone = await third.client.send(new GetItemCommand({ TableName: first.table, Key: { pk: { S: 'older' }, sk: { S: '0000' } } }));
    expect(gone.Item).toBeUndefined();
  });
});

async function forgetIndex(dataDir: string, table: string) {
  const store = createStore({ path: dataDir, createTableMs: 0 });
  await store.db.open();
  const ops: LevelOp[] = [];
  for await (const key of store.db.keys({ gte: `rp-ttlx~${table}~`, lt: `rp-ttlx~${table}~\xff` })) ops.push({ type: 'del', key });
  const setting = (await store.db.get(`rp-ttl~${table}`)) as { indexed?: boolean };
  const { indexed: _, ...earlier } = setting;
  ops.push({ type: 'put', key: `rp-ttl~${table}`, value: earlier });
  await store.db.batch(ops);
  await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));
}
