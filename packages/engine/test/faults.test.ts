import { GetItemCommand, PutItemCommand, TransactWriteItemsCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-dynamodb-streams';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';

const key = (pk: string) => ({ pk: { S: pk }, sk: { S: 'a' } });

describe.skipIf(onlyEmbedded)('fault injection', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  let table: string;
  beforeAll(async () => {
    setup = await ownEngine();
    ({ name: table } = await createTestTable(setup.client));
  });
  afterAll(() => setup.engine.close());

  test.each([
    ['ProvisionedThroughputExceededException', 400],
    ['ThrottlingException', 400],
    ['RequestLimitExceeded', 400],
    ['TransactionConflictException', 400],
    ['InternalServerError', 500],
  ] as const)('the next call fails with %s and writes nothing', async (error, status) => {
    using fault = setup.engine.faults.inject({ operations: ['PutItem'], error, times: 1 });
    const err = await failure(setup.client.send(new PutItemCommand({ TableName: table, Item: key(error) })));
    expect(err.name).toBe(error);
    expect(err.$metadata?.httpStatusCode).toBe(status);
    expect(fault.hits).toBe(1);
    expect((await setup.client.send(new GetItemCommand({ TableName: table, Key: key(error) }))).Item).toBeUndefined();
    // Only the next call: the following one goes through.
    await setup.client.send(new PutItemCommand({ TableName: table, Item: key(error) }));
    expect((await setup.client.send(new GetItemCommand({ TableName: table, Key: key(error) }))).Item).toBeDefined();
  });

  test('the SDK retries an injected throttle by itself', async () => {
    const retrying = dynamoClient({ endpoint: setup.engine.endpoint, maxAttempts: 3 });
    using fault = setup.engine.faults.inject({ operations: ['UpdateItem'], error: 'ThrottlingException', times: 2 });
    const result = await retrying.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key('retried'),
        UpdateExpression: 'ADD n :one',
        ExpressionAttributeValues: { ':one': { N: '1' } },
      }),
    );
    expect(result.$metadata.attempts).toBe(3);
    expect(fault.hits).toBe(2);
    const { Item } = await setup.client.send(new GetItemCommand({ TableName: table, Key: key('retried') }));
    expect(Item?.n).toEqual({ N: '1' });
  });

  test('a transaction conflict cancels a TransactWriteItems with reason TransactionConflict', async () => {
    using _ = setup.engine.faults.inject({ operations: ['TransactWriteItems'], error: 'TransactionConflictException', times: 1 });
    const err = await failure(
      setup.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ Put: { TableName: table, Item: key('tx1') } }, { Put: { TableName: table, Item: key('tx2') } }],
        }),
      ),
    );
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.CancellationReasons).toEqual([
      { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' },
      { Code: 'None' },
    ]);
    expect((await setup.client.send(new GetItemCommand({ TableName: table, Key: key('tx1') }))).Item).toBeUndefined();
  });

  test('GetRecords can be throttled with LimitExceededException', async () => {
    const { streamArn } = await createTestTable(setup.client);
    const { StreamDescription } = await setup.streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
    const { ShardIterator } = await setup.streams.send(
      new GetShardIteratorCommand({
        StreamArn: streamArn,
        ShardId: StreamDescription?.Shards?.[0]?.ShardId,
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    using _ = setup.engine.faults.inject({ operations: ['GetRecords'], error: 'LimitExceededException' });
    const err = await failure(setup.streams.send(new GetRecordsCommand({ ShardIterator })));
    expect(err.name).toBe('LimitExceededException');
  });

  test('a fraction: probability 0 never fires, probability 1 always does', async () => {
    {
      using never = setup.engine.faults.inject({ operations: '*', error: 'InternalServerError', probability: 0 });
      for (let i = 0; i < 5; i++) await setup.client.send(new GetItemCommand({ TableName: table, Key: key('p') }));
      expect(never.hits).toBe(0);
    }
    using always = setup.engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError', probability: 1 });
    for (let i = 0; i < 3; i++)
      expect((await failure(setup.client.send(new GetItemCommand({ TableName: table, Key: key('p') })))).name).toBe('InternalServerError');
    expect(always.hits).toBe(3);
  });

  test('added latency delays the call and then lets it through', async () => {
    using _ = setup.engine.faults.inject({ operations: ['GetItem'], latencyMs: 150, times: 1 });
    const started = performance.now();
    await setup.client.send(new GetItemCommand({ TableName: table, Key: key('slow') }));
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
  });

  test('`times` counts calls exactly, even while other rules add latency', async () => {
    using _slow = setup.engine.faults.inject({ operations: ['GetItem'], latencyMs: 50 });
    using once = setup.engine.faults.inject({ operations: ['GetItem'], error: 'ThrottlingException', times: 1 });
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, () =>
        setup.client.send(new GetItemCommand({ TableName: table, Key: key('t') })).then(
          () => 'ok',
          (err: Error) => err.name,
        ),
      ),
    );
    expect(outcomes.filter((o) => o === 'ThrottlingException')).toHaveLength(1);
    expect(once.hits).toBe(1);
  });

  test('`skip` lets the first calls through, then fails the ones after', async () => {
    using later = setup.engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError', skip: 2, times: 1 });
    const outcome = () =>
      setup.client.send(new GetItemCommand({ TableName: table, Key: key('s') })).then(
        () => 'ok',
        (err: Error) => err.name,
      );
    expect([await outcome(), await outcome(), await outcome(), await outcome()]).toEqual(['ok', 'ok', 'InternalServerError', 'ok']);
    expect(later.hits).toBe(1);
  });

  test('a removed rule stops firing; bad rules are refused', async () => {
    const fault = setup.engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError' });
    fault.remove();
    await setup.client.send(new GetItemCommand({ TableName: table, Key: key('p') }));
    expect(fault.hits).toBe(0);
    expect(() => setup.engine.faults.inject({ operations: '*', error: 'Nope' as never })).toThrow(/unknown fault error/);
    expect(() => setup.engine.faults.inject({ operations: '*', probability: 2 })).toThrow(/probability/);
    expect(() => setup.engine.faults.inject({ operations: '*', skip: -1 })).toThrow(/skip/);
  });
});

describe.skipIf(onlyEmbedded)('on a test clock', () => {
  test('a ClientRequestToken is remembered for 10 minutes, then forgotten', async () => {
    const clock = manualClock();
    const { engine, client } = await ownEngine({ now: clock.now });
    try {
      const { name } = await createTestTable(client);
      const increment = () =>
        client.send(
          new TransactWriteItemsCommand({
            ClientRequestToken: 'same-token',
            TransactItems: [
              {
                Update: {
                  TableName: name,
                  Key: key('n'),
                  UpdateExpression: 'ADD n :one',
                  ExpressionAttributeValues: { ':one': { N: '1' } },
                },
              },
            ],
          }),
        );
      const count = async () => (await client.send(new GetItemCommand({ TableName: name, Key: key('n') }))).Item?.n?.N;
      await increment();
      clock.advance(9 * 60_000);
      await increment();
      expect(await count()).toBe('1');
      clock.advance(11 * 60_000);
      await increment();
      expect(await count()).toBe('2');
    } finally {
      await engine.close();
    }
  });
});
