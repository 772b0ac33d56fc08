/** ClientRequestTokens are kept with the data for their 10 minutes: across a restart, then pruned. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DynamoDBClient, GetItemCommand, PutItemCommand, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, test } from 'vitest';
import { createStore, type LevelOp, type MainDb } from '../src/dynalite.ts';
import { createTokens, TOKEN_TTL_MS } from '../src/transactions/tokens.ts';
import { createTestTable } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const key = { pk: { S: 'p' }, sk: { S: 'counter' } };

const increment = (client: DynamoDBClient, table: string, token: string, by = '1') =>
  client.send(
    new TransactWriteItemsCommand({
      ClientRequestToken: token,
      TransactItems: [
        { Update: { TableName: table, Key: key, UpdateExpression: 'ADD n :by', ExpressionAttributeValues: { ':by': { N: by } } } },
      ],
    }),
  );

const counter = async (client: DynamoDBClient, table: string) =>
  (await client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item?.n?.N;

const leftovers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

describe.skipIf(onlyEmbedded)('ClientRequestTokens', () => {
  test('a token is honoured after a restart, and forgotten once its 10 minutes have passed', async () => {
    const clock = manualClock();
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-tokens-'));
    leftovers.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await ownEngine({ dataDir, now: clock.now });
    const { name } = await createTestTable(first.client, { stream: false });
    await first.client.send(new PutItemCommand({ TableName: name, Item: { ...key, n: { N: '0' } } }));
    await increment(first.client, name, 'token-a');
    await first.engine.close();

    const second = await ownEngine({ dataDir, now: clock.now });
    leftovers.push(() => second.engine.close());
    clock.advance(9 * 60_000);
    await increment(second.client, name, 'token-a');
    expect(await counter(second.client, name)).toBe('1');
    expect((await failure(increment(second.client, name, 'token-a', '2'))).name).toBe('IdempotentParameterMismatchException');

    clock.advance(61_000);
    expect(await second.engine.control.pruneTokens()).toBe(1);
    expect(second.engine.stats().tokens.pruned).toBe(1);
    await increment(second.client, name, 'token-a');
    expect(await counter(second.client, name)).toBe('2');
  });

  test('after a restart, once the stored tokens are loaded, a replay is still answered and a new token is not read', async () => {
    const clock = manualClock();
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-tokens-'));
    leftovers.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await ownEngine({ dataDir, now: clock.now });
    const { name } = await createTestTable(first.client, { stream: false });
    await first.client.send(new PutItemCommand({ TableName: name, Item: { ...key, n: { N: '0' } } }));
    await increment(first.client, name, 'expired');
    clock.advance(TOKEN_TTL_MS - 60_000);
    // More than one page of the load (1,000), over two minutes.
    for (let i = 0; i < 1_050; i += 50)
      await Promise.all(Array.from({ length: 50 }, (_, j) => increment(first.client, name, `kept-${i + j}`)));
    clock.advance(60_000);
    await increment(first.client, name, 'last');
    await first.engine.close();

    clock.advance(30_000);
    const second = await ownEngine({ dataDir, now: clock.now });
    leftovers.push(() => second.engine.close());
    await waitFor(() => second.engine.stats().tokens.recent.ready, { what: 'the stored tokens loaded' });
    const before = second.engine.stats().tokens.lookups;
    for (const token of ['kept-0', 'kept-999', 'kept-1049', 'last']) await increment(second.client, name, token);
    expect(await counter(second.client, name)).toBe('1052');
    expect(second.engine.stats().tokens.lookups - before).toBe(4);
    // Past its window before the restart, 'expired' is new again; new tokens are taken without a read.
    await increment(second.client, name, 'expired');
    for (let i = 0; i < 20; i++) await increment(second.client, name, `new-${i}`);
    expect(await counter(second.client, name)).toBe('1073');
    expect(second.engine.stats().tokens.lookups - before).toBeLessThanOrEqual(5);
  });

  /** An engine on its own clock, its data on disk (tokens in LevelDB) or in memory (tokens in a map). */
  const engineOn = async (store: 'disk' | 'memory', clock: ReturnType<typeof manualClock>) => {
    let dataDir: string | undefined;
    if (store === 'disk') {
      const dir = mkdtempSync(join(tmpdir(), 'runplane-tokens-'));
      leftovers.push(() => rmSync(dir, { recursive: true, force: true }));
      dataDir = dir;
    }
    const own = await ownEngine({ dataDir, now: clock.now });
    leftovers.push(() => own.engine.close());
    return own;
  };

  describe.each(['disk', 'memory'] as const)('kept %s', (store) => {
    test('pruning deletes only the tokens past their window, and keeps a token used again since', async () => {
      const clock = manualClock();
      const { engine, client } = await engineOn(store, clock);
      const { name } = await createTestTable(client, { stream: false });
      for (const token of ['old-1', 'old-2', 'reused']) await increment(client, name, token);
      clock.advance(11 * 60_000);
      // Past its window, 'reused' is a new transaction: applied, and remembered from now.
      await increment(client, name, 'reused');
      clock.advance(5 * 60_000);
      await increment(client, name, 'new');
      await engine.control.pruneTokens();
      // old-1, old-2 and the first use of 'reused' (in memory, dropped when it was used again).
      expect(engine.stats().tokens.pruned).toBe(3);
      expect(await counter(client, name)).toBe('5');
      await increment(client, name, 'reused');
      await increment(client, name, 'new');
      expect(await counter(client, name)).toBe('5');
      // Forgotten: a new transaction.
      await increment(client, name, 'old-1');
      expect(await counter(client, name)).toBe('6');
    });

    test('pruning goes through more tokens than one batch holds (500)', async () => {
      const clock = manualClock();
      const { engine, client } = await engineOn(store, clock);
      const { name } = await createTestTable(client, { stream: false });
      for (let i = 0; i < 520; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => increment(client, name, `bulk-${i + j}`)));
      clock.advance(11 * 60_000);
      expect(await engine.control.pruneTokens()).toBe(520);
      expect(await engine.control.pruneTokens()).toBe(0);
    });

    test('a replay is answered and a mismatch refused, before and after a later transaction; a cancelled one leaves no token', async () => {
      const clock = manualClock();
      const { engine, client } = await engineOn(store, clock);
      const { name } = await createTestTable(client, { stream: false });
      await client.send(new PutItemCommand({ TableName: name, Item: { ...key, n: { N: '0' } } }));
      await increment(client, name, 'a');
      await increment(client, name, 'b');
      await increment(client, name, 'a');
      expect((await failure(increment(client, name, 'a', '2'))).name).toBe('IdempotentParameterMismatchException');
      expect(await counter(client, name)).toBe('2');
      const refused = (token: string) =>
        client.send(
          new TransactWriteItemsCommand({
            ClientRequestToken: token,
            TransactItems: [{ ConditionCheck: { TableName: name, Key: key, ConditionExpression: 'attribute_not_exists(pk)' } }],
          }),
        );
      expect((await failure(refused('c'))).name).toBe('TransactionCanceledException');
      // Not applied, so not remembered: the same token with another request is a new transaction.
      await increment(client, name, 'c');
      expect(await counter(client, name)).toBe('3');
      if (store === 'memory') expect(engine.stats().tokens).toMatchObject({ kept: 3, lookups: 0, inFlight: 0 });
    });

    test('the same request sent again written otherwise (spacing) is answered, not refused as another', async () => {
      const clock = manualClock();
      const { engine, client } = await engineOn(store, clock);
      const { name } = await createTestTable(client, { stream: false });
      const request = {
        ClientRequestToken: 'spaced',
        TransactItems: [
          { Update: { TableName: name, Key: key, UpdateExpression: 'ADD n :by', ExpressionAttributeValues: { ':by': { N: '1' } } } },
        ],
      };
      const target = 'DynamoDB_20120810.TransactWriteItems';
      expect((await engine.answer(target, JSON.stringify(request))).status).toBe(200);
      expect((await engine.answer(target, JSON.stringify(request, null, 2))).status).toBe(200);
      expect(await counter(client, name)).toBe('1');
    });

    test('tokens noted after the clock was set back are still pruned once past their window', async () => {
      const clock = manualClock();
      const { engine, client } = await engineOn(store, clock);
      const { name } = await createTestTable(client, { stream: false });
      await increment(client, name, 'before');
      clock.advance(-60 * 60_000);
      for (let i = 0; i < 20; i++) await increment(client, name, `after-${i}`);
      // Past the window of those noted after the set-back, not yet of the one before it.
      clock.advance(11 * 60_000);
      expect(await engine.control.pruneTokens()).toBe(20);
      if (store === 'memory') expect(engine.stats().tokens.kept).toBe(1);
      clock.advance(60 * 60_000);
      expect(await engine.control.pruneTokens()).toBe(1);
      if (store === 'memory') expect(engine.stats().tokens.kept).toBe(0);
    });
  });

  test('one transaction with a token more than the bound in flight is answered ThrottlingException', async () => {
    const { engine, client } = await ownEngine({ lockWaitMs: Number.POSITIVE_INFINITY, limits: { pendingTokens: 1 } });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    const stall = engine.faults.inject({ operations: ['TransactWriteItems'], lockedLatencyMs: 600_000, times: 1 });
    leftovers.push(() => stall.remove());
    const stalled = increment(client, name, 'first');
    await waitFor(() => engine.stats().tokens.inFlight === 1 && engine.stats().locks.held === 1, { what: 'the first to hold its lock' });
    expect((await failure(increment(client, name, 'second'))).name).toBe('ThrottlingException');
    expect((await failure(increment(client, name, 'first'))).name).toBe('TransactionInProgressException');
    stall.remove();
    await stalled;
    await increment(client, name, 'second');
    expect(await counter(client, name)).toBe('2');
  });
});

describe.skipIf(onlyEmbedded)('a token looked up while the items are locked', () => {
  test('a request already answered is answered again at once, also while another transaction holds its item', async () => {
    const { engine, client } = await ownEngine({ lockWaitMs: Number.POSITIVE_INFINITY });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    await increment(client, name, 'answered');
    const stall = engine.faults.inject({ operations: ['TransactWriteItems'], lockedLatencyMs: 600_000, times: 1 });
    leftovers.push(() => stall.remove());
    const holding = increment(client, name, 'holding');
    await waitFor(() => engine.stats().locks.held === 1, { what: 'the other transaction holding the item' });
    // Neither waits for the lock: the answered one is answered, the mismatched one refused.
    await increment(client, name, 'answered');
    expect((await failure(increment(client, name, 'answered', '5'))).name).toBe('IdempotentParameterMismatchException');
    expect(engine.stats().tokens.inFlight).toBe(1);
    stall.remove();
    await holding;
    expect(await counter(client, name)).toBe('2');
    // Nothing was left locked by the requests that did not wait.
    await increment(client, name, 'after');
    expect(await counter(client, name)).toBe('3');
    expect(engine.stats().locks.held).toBe(0);
  });

  test('a replay takes no lock: a write beside it is never refused, and a stall meant for a transaction does not meet it', async () => {
    const { engine, client } = await ownEngine({ lockWaitMs: 0 });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    await increment(client, name, 'once');
    const stall = engine.faults.inject({ operations: ['TransactWriteItems'], lockedLatencyMs: 600_000, times: 1 });
    leftovers.push(() => stall.remove());
    await increment(client, name, 'once');
    expect(engine.stats().locks).toMatchObject({ held: 0, waiting: 0 });
    stall.remove();
    const put = (i: number) => client.send(new PutItemCommand({ TableName: name, Item: { ...key, n: { N: String(i) } } }));
    for (let i = 0; i < 40; i++) await Promise.all([increment(client, name, 'once'), put(i)]);
    expect(engine.stats().locks.conflicts).toBe(0);
  });

  test('a request refused before it runs (not valid, or its lock not granted) is answered, and the engine goes on', async () => {
    // On disk the token's read is slower than preparing and locking: what fails first must not go unhandled.
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-tokens-'));
    leftovers.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const { engine, client } = await ownEngine({ dataDir, lockWaitMs: 0 });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    const twice = (token: string) =>
      client.send(
        new TransactWriteItemsCommand({
          ClientRequestToken: token,
          TransactItems: [
            { Put: { TableName: name, Item: { ...key, n: { N: '1' } } } },
            { ConditionCheck: { TableName: name, Key: key, ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        }),
      );
    for (let i = 0; i < 5; i++) expect((await failure(twice(`invalid-${i}`))).name).toBe('ValidationException');
    const stall = engine.faults.inject({ operations: ['PutItem'], lockedLatencyMs: 600_000, times: 1 });
    leftovers.push(() => stall.remove());
    const held = client.send(new PutItemCommand({ TableName: name, Item: { ...key, n: { N: '0' } } }));
    await waitFor(() => engine.stats().locks.held === 1, { what: 'a put holding the item' });
    for (let i = 0; i < 5; i++) expect((await failure(increment(client, name, `refused-${i}`))).name).toBe('TransactionCanceledException');
    stall.remove();
    await held;
    await increment(client, name, 'after');
    expect(await counter(client, name)).toBe('1');
  });
});

describe('pruning beside transactions in flight', () => {
  /** A store's database, whose prune batches (they delete expiry entries) can be held back. */
  async function tokensOnStore() {
    const store = createStore({ createTableMs: 0 });
    await store.db.open();
    leftovers.push(() => store.db.close());
    let now = 1_000_000;
    let beforePruneBatch: (() => Promise<void>) | undefined;
    let afterPruneRead: (() => void) | undefined;
    const real = store.db;
    // Its own methods, on the database: level's private fields need it as `this`.
    const db = {
      values: (options: Parameters<MainDb['values']>[0]) => real.values(options),
      get: async (key: string) => {
        const value = await real.get(key);
        if (key.startsWith('rp-txtok~')) afterPruneRead?.();
        return value;
      },
      batch: async (ops: LevelOp[]) => {
        if (ops.some((op) => op.type === 'del' && op.key.startsWith('rp-txexp~'))) await beforePruneBatch?.();
        return real.batch(ops);
      },
    } as MainDb;
    const tokens = createTokens(db, () => now);
    const commit = async (token: string, hash: string) => {
      const claim = await tokens.claim(token, hash);
      if (!('ops' in claim)) throw new Error(`token ${token} answered from before`);
      await db.batch(claim.ops);
      claim.release();
    };
    const expiryEntries = async () => {
      let n = 0;
      for await (const _ of real.keys({ gte: 'rp-txexp~', lt: 'rp-txexp~~' })) n++;
      return n;
    };
    return {
      tokens,
      commit,
      expiryEntries,
      pass: (ms: number) => {
        now += ms;
      },
      hooks: (h: { beforePruneBatch?: () => Promise<void>; afterPruneRead?: () => void }) => {
        beforePruneBatch = h.beforePruneBatch;
        afterPruneRead = h.afterPruneRead;
      },
    };
  }

  test('a token used again while a prune deletes its expired use keeps the new use', async () => {
    const { tokens, commit, pass, hooks } = await tokensOnStore();
    await commit('t', 'first');
    pass(TOKEN_TTL_MS + 1);
    // Between the prune's read of the old use and its deletes, a new transaction takes the token.
    let reuse: Promise<void> | undefined;
    hooks({
      afterPruneRead: () => {
        reuse ??= commit('t', 'second');
      },
      // Held back until the new use has landed, or a second has passed (the prune holds the token: the new use waits for it).
      beforePruneBatch: () => Promise.race([reuse, new Promise<void>((resolve) => setTimeout(resolve, 1_000))]),
    });
    expect(await tokens.prune()).toBe(1);
    hooks({});
    await reuse;
    // A retry of the new transaction is answered from its token, not applied again.
    expect(await tokens.claim('t', 'second')).toEqual({ result: {} });
  });

  test('a token in flight is left to a later prune, which deletes it', async () => {
    const { tokens, commit, pass, expiryEntries } = await tokensOnStore();
    await commit('t', 'first');
    pass(TOKEN_TTL_MS + 1);
    const inFlight = await tokens.claim('t', 'second');
    if (!('ops' in inFlight)) throw new Error('expected a new use of the token');
    expect(await tokens.prune()).toBe(0);
    expect(await expiryEntries()).toBe(1);
    // Its transaction was cancelled: nothing written, the old use is pruned next time.
    inFlight.release();
    expect(await tokens.prune()).toBe(1);
    expect(await expiryEntries()).toBe(0);
  });
});
