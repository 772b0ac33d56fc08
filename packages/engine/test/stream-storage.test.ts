/**
 * Stream records live on disk with the data; memory holds a bounded cache of the newest.
 * These check the mechanism, not memory figures (those are in the endurance benchmark).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { type _Record, DescribeStreamCommand, type DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { afterEach, describe, expect, test } from 'vitest';
import { createStore, type LevelOp } from '../src/dynalite.ts';
import type { EngineOptions } from '../src/index.ts';
import { createTestTable, readStream } from './support/aws.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';

const CACHE_BYTES = 4_096;
const padding = 'x'.repeat(200);

const leftovers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-streams-'));
  leftovers.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function engineWith(options: EngineOptions) {
  const setup = await ownEngine({ streamCacheBytes: CACHE_BYTES, shardMaxRecords: 50, ...options });
  leftovers.push(() => setup.engine.close());
  return setup;
}

const sortKeys = (records: _Record[]) => records.map((r) => r.dynamodb?.Keys?.sk?.S);
const numbered = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => String(from + i).padStart(3, '0'));
const shardCount = async (streams: DynamoDBStreamsClient, arn: string) =>
  (await streams.send(new DescribeStreamCommand({ StreamArn: arn }))).StreamDescription?.Shards?.length;

async function putAll(send: (command: PutItemCommand) => Promise<unknown>, table: string, from: number, to: number) {
  for (const sk of numbered(from, to))
    await send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'p' }, sk: { S: sk }, padding: { S: padding } } }));
}

describe.skipIf(onlyEmbedded)('stream records on disk, a bounded cache in memory', () => {
  test('records evicted from the cache are read back from disk, in order, also after a restart', async () => {
    const dataDir = tempDir();
    const first = await ownEngine({ dataDir, streamCacheBytes: CACHE_BYTES, shardMaxRecords: 50 });
    const { name, streamArn } = await createTestTable(first.client);
    const arn = streamArn as string;
    await putAll((c) => first.client.send(c), name, 0, 70);
    const cached = first.engine.stats().streams;
    expect(cached.cachedBytes).toBeLessThanOrEqual(CACHE_BYTES);
    expect(cached.cachedRecords).toBeLessThan(70);

    const before = await readStream(first.streams, arn, (all) => all.length >= 70);
    expect(sortKeys(before)).toEqual(numbered(0, 70));
    expect(first.engine.stats().streams.diskReads).toBeGreaterThan(0);
    expect(await shardCount(first.streams, arn)).toBe(2);
    await first.engine.close();

    const second = await engineWith({ dataDir });
    // Starting reads the last record of the stream, not all 70.
    expect(second.engine.stats().streams.readAtStart).toBe(1);
    expect(second.engine.stats().streams.cachedRecords).toBe(0);
    expect(await readStream(second.streams, arn, (all) => all.length >= 70)).toEqual(before);

    // Numbering and the shard's record count go on where they were: 20 more fill the second shard.
    await putAll((c) => second.client.send(c), name, 70, 110);
    const all = await readStream(second.streams, arn, (records) => records.length >= 110);
    expect(sortKeys(all)).toEqual(numbered(0, 110));
    const seqs = all.map((r) => BigInt(r.dynamodb?.SequenceNumber as string));
    expect(seqs.every((seq, i) => i === 0 || seq > (seqs[i - 1] as bigint))).toBe(true);
    expect(await shardCount(second.streams, arn)).toBe(3);
  });

  test('in memory, records past the cache are read from the store, not held twice', async () => {
    const { engine, client, streams } = await engineWith({});
    const { name, streamArn } = await createTestTable(client);
    await putAll((c) => client.send(c), name, 0, 60);
    expect(engine.stats().streams.cachedBytes).toBeLessThanOrEqual(CACHE_BYTES);
    expect(sortKeys(await readStream(streams, streamArn as string, (all) => all.length >= 60))).toEqual(numbered(0, 60));
    expect(engine.stats().streams.diskReads).toBeGreaterThan(0);
  });

  test('a reader at the tail is served from memory', async () => {
    const { engine, client, streams } = await engineWith({ streamCacheBytes: 1024 * 1024 });
    const { name, streamArn } = await createTestTable(client);
    await putAll((c) => client.send(c), name, 0, 20);
    expect(sortKeys(await readStream(streams, streamArn as string, (all) => all.length >= 20))).toEqual(numbered(0, 20));
    expect(engine.stats().streams.diskReads).toBe(0);
  });

  test('data written in the earlier layout (shards inside the stream) is read and carried on', async () => {
    const dataDir = tempDir();
    const first = await ownEngine({ dataDir, shardMaxRecords: 50 });
    const { name, streamArn } = await createTestTable(first.client);
    const arn = streamArn as string;
    await putAll((c) => first.client.send(c), name, 0, 30);
    const before = await readStream(first.streams, arn, (all) => all.length >= 30);
    await first.engine.close();
    await rewriteToEarlierLayout(dataDir, arn);

    const second = await engineWith({ dataDir });
    expect(await readStream(second.streams, arn, (all) => all.length >= 30)).toEqual(before);
    await putAll((c) => second.client.send(c), name, 30, 60);
    expect(sortKeys(await readStream(second.streams, arn, (all) => all.length >= 60))).toEqual(numbered(0, 60));
    // The 30 records of the earlier layout were counted: the shard rolled over at 50.
    expect(await shardCount(second.streams, arn)).toBe(2);
  });
});

/** What the engine wrote before shards had keys of their own: shards inside the stream's value, records without `n`. */
async function rewriteToEarlierLayout(dataDir: string, arn: string) {
  const store = createStore({ path: dataDir, createTableMs: 0 });
  await store.db.open();
  const ops: LevelOp[] = [];
  const shards: { shardId: string; parentShardId?: string; createdAt: number; startSeq: number; trimmedThrough: number }[] = [];
  for await (const shard of store.db.values({ gte: 'rp-shard~', lt: 'rp-shard~\xff' })) {
    const { arn: _, startSeq, ...rest } = shard as { arn: string; startSeq: number; shardId: string; createdAt: number };
    ops.push({ type: 'del', key: `rp-shard~${arn}~${String(startSeq).padStart(21, '0')}` });
    shards.push({ ...rest, startSeq, trimmedThrough: 0 });
  }
  for await (const value of store.db.values({ gte: 'rp-stream~', lt: 'rp-stream~\xff' })) {
    const { trimmedThrough: _, ...stream } = value as { arn: string; trimmedThrough: number };
    ops.push({ type: 'put', key: `rp-stream~${stream.arn}`, value: { ...stream, shards } });
  }
  for await (const value of store.db.values({ gte: 'rp-srec~', lt: 'rp-srec~\xff' })) {
    const { n: _, ...record } = value as { n: number; seq: number };
    ops.push({ type: 'put', key: `rp-srec~${arn}~${String(record.seq).padStart(21, '0')}`, value: record });
  }
  await store.db.batch(ops);
  await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));
}
