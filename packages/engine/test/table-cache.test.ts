/**
 * Table descriptions kept decoded (packages/engine/src/table-cache.ts): read from LevelDB once, not
 * once per item action, and never stale: any write of a description, by dynalite or by the
 * engine, is seen by the next item request.
 */
import {
  CreateTableCommand,
  DeleteTableCommand,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateTableCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, test } from 'vitest';
import { createStore, getTable, type LevelOp, type Store } from '../src/dynalite.ts';
import type { EngineError } from '../src/errors.ts';
import { cacheTables, keptTable } from '../src/table-cache.ts';
import { uniqueName } from './support/aws.ts';
import { ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const succeeds = (request: Promise<unknown>) =>
  request.then(
    () => true,
    () => false,
  );

const leftovers: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const close of leftovers.splice(0)) await close();
});

/** A store with the cache, counting the reads of table descriptions that reach LevelDB. */
async function countingStore() {
  const store = createStore({ createTableMs: 0 });
  await store.db.open();
  leftovers.push(async () => store.db.close());
  let reads = 0;
  const real = store.db.get.bind(store.db) as (key: string, cb?: unknown) => unknown;
  (store.db as unknown as { get: typeof real }).get = (key, cb) => {
    if (key.startsWith('table~')) reads++;
    return real(key, cb);
  };
  const cache = cacheTables(store);
  return { store, cache, reads: () => reads };
}

const description = (name: string, status = 'ACTIVE') => ({
  TableName: name,
  TableStatus: status,
  KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
  AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
});

const putDescription = (store: Store, name: string, status = 'ACTIVE') =>
  store.db.batch([{ type: 'put', key: `table~${name}`, value: description(name, status) } as LevelOp]);

describe('the table cache on a store', () => {
  test('a description is read from LevelDB once, then kept until a write touches one', async () => {
    const { store, cache, reads } = await countingStore();
    await putDescription(store, 'a');
    for (let i = 0; i < 5; i++) expect((await getTable(store, 'a')).TableStatus).toBe('ACTIVE');
    expect(reads()).toBe(1);
    expect(cache.size()).toBe(1);
    // Written through dynalite's table sublevel (a put on the main database under its prefix).
    await new Promise<void>((resolve, reject) =>
      store.tableDb.put('a', { ...description('a'), ItemCount: 7 }, (err) => (err ? reject(err) : resolve())),
    );
    expect(cache.size()).toBe(0);
    expect((await getTable(store, 'a')).ItemCount).toBe(7);
    expect(reads()).toBe(2);
    // Written in one of the engine's own batches, with other rows.
    await store.db.batch([
      { type: 'put', key: 'item-a~x', value: { pk: { S: 'x' } } },
      { type: 'put', key: 'table~a', value: { ...description('a'), ItemCount: 8 } },
    ]);
    expect((await getTable(store, 'a')).ItemCount).toBe(8);
    // Writes of other rows keep it.
    await store.db.batch([{ type: 'put', key: 'item-a~y', value: { pk: { S: 'y' } } }]);
    await getTable(store, 'a');
    expect(reads()).toBe(3);
  });

  test('what it hands out cannot be changed by one reader for the others', async () => {
    const { store } = await countingStore();
    await putDescription(store, 'b');
    await getTable(store, 'b');
    const kept = await getTable(store, 'b');
    expect(Object.isFrozen(kept)).toBe(true);
    expect(Object.isFrozen(kept.KeySchema[0])).toBe(true);
    expect(() => {
      (kept as { TableStatus: string }).TableStatus = 'DELETING';
    }).toThrow(TypeError);
    expect((await getTable(store, 'b')).TableStatus).toBe('ACTIVE');
  });

  test('a kept table being created or deleted is not found by a reader that checks the status', async () => {
    const { store, reads } = await countingStore();
    await putDescription(store, 'c', 'CREATING');
    expect((await getTable(store, 'c', false)).TableStatus).toBe('CREATING');
    expect((await getTable(store, 'c', false)).TableStatus).toBe('CREATING');
    expect(reads()).toBe(1);
    expect(((await failure(getTable(store, 'c'))) as unknown as EngineError).code).toBe('ResourceNotFoundException');
    // dynalite's two-argument form checks the status too.
    const found = await new Promise<unknown>((resolve) => store.getTable('c', (err, table) => resolve(err ?? table)));
    expect((found as { statusCode?: number }).statusCode).toBe(400);
  });

  test('a transaction takes a kept table at once, never one not yet read, being created or deleted, or written since', async () => {
    const { store } = await countingStore();
    await putDescription(store, 'e');
    await putDescription(store, 'f', 'DELETING');
    expect(keptTable(store, 'e')).toBeUndefined();
    await getTable(store, 'e', false);
    await getTable(store, 'f', false);
    expect(keptTable(store, 'e')?.TableStatus).toBe('ACTIVE');
    expect(keptTable(store, 'f')).toBeUndefined();
    await putDescription(store, 'e', 'UPDATING');
    expect(keptTable(store, 'e')).toBeUndefined();
  });

  test('a read that began before a write to descriptions ended is not kept', async () => {
    const { store, cache } = await countingStore();
    await putDescription(store, 'd');
    const writing = putDescription(store, 'd', 'UPDATING');
    const read = getTable(store, 'd', false);
    await Promise.all([writing, read]);
    expect(cache.size()).toBe(0);
    expect((await getTable(store, 'd', false)).TableStatus).toBe('UPDATING');
  });
});

describe('the table cache in the engine', () => {
  test('item requests see a table deleted, created again with another key, and updated', async () => {
    const { engine, client } = await ownEngine({ createTableMs: 0 });
    leftovers.push(() => engine.close());
    const name = uniqueName('cache');
    const create = (key: string) =>
      client.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }],
        }),
      );
    await create('pk');
    await waitFor(() => succeeds(client.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'a' } } }))), {
      what: 'the table active',
    });
    await client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'a' } } }));
    await client.send(new DeleteTableCommand({ TableName: name }));
    await waitFor(
      () =>
        client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'b' } } })).then(
          () => false,
          (err: Error) => err.name === 'ResourceNotFoundException',
        ),
      { what: 'the table gone for item requests' },
    );
    await waitFor(() => succeeds(create('id')), { what: 'the table created again' });
    await waitFor(() => succeeds(client.send(new PutItemCommand({ TableName: name, Item: { id: { S: 'c' } } }))), {
      what: 'a put with the new key',
    });
    // The old key is refused, in a transaction as alone.
    expect(((await failure(client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'd' } } })))) as Error).name).toBe(
      'ValidationException',
    );
    const refused = (await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ Put: { TableName: name, Item: { pk: { S: 'e' } } } }, { Put: { TableName: name, Item: { id: { S: 'f' } } } }],
        }),
      ),
    )) as Error;
    expect(refused.name).toBe('TransactionCanceledException');
    const updated = await client.send(
      new UpdateTableCommand({
        TableName: name,
        BillingMode: 'PROVISIONED',
        ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 5 },
      }),
    );
    expect(updated.TableDescription?.BillingModeSummary?.BillingMode).toBe('PROVISIONED');
  });
});
