/**
 * Item locks have a bound: a request that cannot get an item held by a stalled batch is
 * answered TransactionConflict instead of waiting forever. The stall is injected (it holds
 * the locks until its fault rule is removed), so nothing here depends on timing but the bound.
 */
import {
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactGetItemsCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, test } from 'vitest';
import type { Engine, EngineOptions } from '../src/index.ts';
import { createTestTable } from './support/aws.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const key = (sk: string) => ({ pk: { S: 'p' }, sk: { S: sk } });

const leftovers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(leftovers.splice(0).map((dispose) => dispose()));
});

async function setUp(options: EngineOptions) {
  const { engine, client } = await ownEngine(options);
  leftovers.push(() => engine.close());
  const { name } = await createTestTable(client, { stream: false });
  const put = (sk: string, v: string) => client.send(new PutItemCommand({ TableName: name, Item: { ...key(sk), v: { S: v } } }));
  const transactPut = (sk: string, v: string) =>
    client.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: name, Item: { ...key(sk), v: { S: v } } } }] }));
  return { engine, client, table: name, put, transactPut };
}

/** Starts a transaction on `sk` that takes its lock and stalls until the returned fault is removed. */
async function stalledTransaction(engine: Engine, transactPut: (sk: string, v: string) => Promise<unknown>, sk: string) {
  const stall = engine.faults.inject({ operations: ['TransactWriteItems'], lockedLatencyMs: 600_000, times: 1 });
  leftovers.push(async () => stall.remove());
  const stalled = transactPut(sk, 'first');
  await waitFor(() => engine.stats().locks.held === 1, { what: 'the stalled transaction to hold its lock' });
  return { stall, stalled };
}

const value = async (client: DynamoDBClient, table: string, sk: string) =>
  (await client.send(new GetItemCommand({ TableName: table, Key: key(sk), ConsistentRead: true }))).Item?.v?.S;

describe.skipIf(onlyEmbedded)('item locks', () => {
  test('requests on an item a stalled transaction holds are answered TransactionConflict after the bound', async () => {
    const { engine, client, table, put, transactPut } = await setUp({ lockWaitMs: 100 });
    const { stall, stalled } = await stalledTransaction(engine, transactPut, 'x');

    const transaction = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { ...key('free'), v: { S: 'no' } } } },
            { Put: { TableName: table, Item: { ...key('x'), v: { S: 'no' } } } },
          ],
        }),
      ),
    );
    expect(transaction.name).toBe('TransactionCanceledException');
    expect(transaction.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' },
    ]);
    const single = await failure(put('x', 'no'));
    expect(single.name).toBe('TransactionConflictException');
    const read = await failure(client.send(new TransactGetItemsCommand({ TransactItems: [{ Get: { TableName: table, Key: key('x') } }] })));
    expect(read.name).toBe('TransactionCanceledException');
    expect(read.CancellationReasons?.map((r) => r.Code)).toEqual(['TransactionConflict']);
    expect(engine.stats().locks.conflicts).toBe(3);
    // Nothing of the refused transaction was written, and the lock it took on 'free' was given back.
    expect(await value(client, table, 'free')).toBeUndefined();
    await put('free', 'yes');

    stall.remove();
    await stalled;
    expect(await value(client, table, 'x')).toBe('first');
    await put('x', 'second');
    expect(await value(client, table, 'x')).toBe('second');
    expect(engine.stats().locks).toEqual({ held: 0, waiting: 0, conflicts: 3 });
  });

  test('with lockWaitMs: Infinity a request waits for the stalled holder and then runs', async () => {
    const { engine, client, table, put, transactPut } = await setUp({ lockWaitMs: Number.POSITIVE_INFINITY });
    const { stall, stalled } = await stalledTransaction(engine, transactPut, 'x');
    const waiting = put('x', 'second');
    await waitFor(() => engine.stats().locks.waiting === 1, { what: 'the put to wait for the lock' });
    stall.remove();
    await Promise.all([stalled, waiting]);
    expect(await value(client, table, 'x')).toBe('second');
    expect(engine.stats().locks.conflicts).toBe(0);
  });

  test('one waiter more than the bound per item is answered TransactionConflict at once', async () => {
    const { engine, client, table, put, transactPut } = await setUp({
      lockWaitMs: Number.POSITIVE_INFINITY,
      limits: { lockWaitersPerItem: 2 },
    });
    const { stall, stalled } = await stalledTransaction(engine, transactPut, 'x');
    const waiters = [put('x', 'a'), put('x', 'b')];
    await waitFor(() => engine.stats().locks.waiting === 2, { what: 'two puts to wait for the lock' });
    expect((await failure(put('x', 'c'))).name).toBe('TransactionConflictException');
    stall.remove();
    await Promise.all([stalled, ...waiters]);
    expect(['a', 'b']).toContain(await value(client, table, 'x'));
  });
});
