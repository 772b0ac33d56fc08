/**
 * The throughput model: units counted as DynamoDB's Developer Guide counts them ("Capacity
 * unit consumption": 1 KB a write unit on the larger of the item before and after, 4 KB a
 * read unit, half for an eventually consistent read, twice in a transaction, a global index's
 * writes on its own partitions), and a bucket per partition key value. The buckets here hold
 * 20 units, on a clock the test moves, so every figure is exact and nothing waits on time.
 */
import {
  BatchWriteItemCommand,
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient, uniqueName } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';
import { type Failure, failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

/** An item of exactly `bytes` bytes as DynamoDB sizes it (attribute names plus UTF-8 values). */
function itemOfSize(pk: string, sk: string, bytes: number, extra: Record<string, { S: string }> = {}) {
  const fixed = 'pk'.length + pk.length + 'sk'.length + sk.length + 'data'.length;
  const extraBytes = Object.entries(extra).reduce((sum, [name, value]) => sum + name.length + value.S.length, 0);
  return { pk: { S: pk }, sk: { S: sk }, data: { S: 'x'.repeat(bytes - fixed - extraBytes) }, ...extra };
}

const put = (client: DynamoDBClient, table: string, item: Record<string, { S: string }>) =>
  client.send(new PutItemCommand({ TableName: table, Item: item }));

/** Sends `count` requests one after another; resolves to how many went through before the first refusal. */
async function untilRefused(count: number, send: (i: number) => Promise<unknown>) {
  for (let i = 0; i < count; i++) {
    const outcome = await send(i).then(
      () => undefined,
      (err: Failure) => err,
    );
    if (outcome) return { admitted: i, refusal: outcome };
  }
  return { admitted: count, refusal: undefined };
}

const KB = 1024;
const ON_DEMAND_MESSAGE =
  'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html';

describe.skipIf(onlyEmbedded)('per-partition throughput limits', () => {
  const clock = manualClock();
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  let client: DynamoDBClient;
  let table: string;
  let tableArn: string;
  beforeAll(async () => {
    setup = await ownEngine({ now: clock.now, partitionLimits: { writeUnits: 20, readUnits: 20 } });
    client = setup.client;
    ({ name: table } = await createTestTable(client, { stream: false }));
    tableArn = `arn:aws:dynamodb:us-east-1:000000000000:table/${table}`;
  });
  afterAll(() => setup.engine.close());

  test('a partition takes 20 writes of 1 KB a second, the 21st is throttled; another partition is not, and a second later it takes 20 again', async () => {
    const hot = uniqueName('hot');
    const first = await untilRefused(25, (i) => put(client, table, itemOfSize(hot, `s${i}`, KB)));
    expect(first.admitted).toBe(20);
    expect(first.refusal?.name).toBe('ThrottlingException');
    // The same moment, another partition key value: its own bucket.
    await put(client, table, itemOfSize(uniqueName('cold'), 's', KB));
    clock.advance(1000);
    expect((await untilRefused(25, (i) => put(client, table, itemOfSize(hot, `t${i}`, KB)))).admitted).toBe(20);
  });

  test('items of 3 KB take 3 units each: 6 a second', async () => {
    const hot = uniqueName('big');
    expect((await untilRefused(10, (i) => put(client, table, itemOfSize(hot, `s${i}`, 3 * KB)))).admitted).toBe(6);
    // Rounded up: one byte over a kilobyte is 2 units.
    const edge = uniqueName('edge');
    expect((await untilRefused(15, (i) => put(client, table, itemOfSize(edge, `s${i}`, KB + 1)))).admitted).toBe(10);
  });

  test('an update counts the larger of the item before and after it, as its ConsumedCapacity says', async () => {
    const pk = uniqueName('upd');
    await put(client, table, itemOfSize(pk, 'a', 3 * KB));
    const { ConsumedCapacity } = await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: pk }, sk: { S: 'a' } },
        UpdateExpression: 'REMOVE #data',
        ExpressionAttributeNames: { '#data': 'data' },
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    expect(ConsumedCapacity).toEqual({ TableName: table, CapacityUnits: 3 });
  });

  test('the refusal is a ThrottlingException (on-demand) with its reason and the table ARN, as the SDK parses it', async () => {
    const hot = uniqueName('shape');
    const { refusal } = await untilRefused(25, (i) => put(client, table, itemOfSize(hot, `s${i}`, KB)));
    expect(refusal?.name).toBe('ThrottlingException');
    expect(refusal?.$metadata?.httpStatusCode).toBe(400);
    expect(refusal?.message).toBe(ON_DEMAND_MESSAGE);
    expect(refusal?.throttlingReasons).toEqual([{ reason: 'TableWriteKeyRangeThroughputExceeded', resource: tableArn }]);
  });

  test('transactional writes count twice: 10 transactions of one 1 KB item a second, then cancelled with ThrottlingError', async () => {
    const hot = uniqueName('tx');
    const { admitted, refusal } = await untilRefused(15, (i) =>
      client.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: table, Item: itemOfSize(hot, `s${i}`, KB) } }] })),
    );
    expect(admitted).toBe(10);
    expect(refusal?.name).toBe('TransactionCanceledException');
    expect(refusal?.CancellationReasons).toEqual([{ Code: 'ThrottlingError', Message: ON_DEMAND_MESSAGE }]);
  });

  test('strongly consistent reads count twice eventually consistent ones: 20 against 40 a second of a 4 KB item', async () => {
    const strong = uniqueName('strong');
    const eventual = uniqueName('eventual');
    await put(client, table, itemOfSize(strong, 'a', 4 * KB));
    await put(client, table, itemOfSize(eventual, 'a', 4 * KB));
    const read = (pk: string, consistent: boolean) =>
      client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk }, sk: { S: 'a' } }, ConsistentRead: consistent }));
    const strongly = await untilRefused(50, () => read(strong, true));
    const eventually = await untilRefused(50, () => read(eventual, false));
    expect([strongly.admitted, eventually.admitted]).toEqual([20, 40]);
    expect(strongly.refusal?.throttlingReasons).toEqual([{ reason: 'TableReadKeyRangeThroughputExceeded', resource: tableArn }]);
  });

  test('a Query counts the items it reads summed, then rounded up to 4 KB', async () => {
    const pk = uniqueName('query');
    // Ten items of 1,000 bytes: 10,000 bytes, 3 units of 4 KB; 1.5 eventually consistent.
    for (let i = 0; i < 10; i++) await put(client, table, itemOfSize(pk, `s${i}`, 1000));
    const query = (consistent: boolean) =>
      client.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: pk } },
          ConsistentRead: consistent,
          ReturnConsumedCapacity: 'TOTAL',
        }),
      );
    expect((await query(false)).ConsumedCapacity).toEqual({ TableName: table, CapacityUnits: 1.5 });
    expect((await query(true)).ConsumedCapacity).toEqual({ TableName: table, CapacityUnits: 3 });
    // 20 - 1.5 - 3 = 15.5 left: five more strongly consistent queries (15), and the sixth is throttled.
    expect((await untilRefused(10, () => query(true))).admitted).toBe(5);
    clock.advance(1000);
  });

  test('a batch takes what its partitions hold and returns the rest unprocessed; a batch of nothing but refusals is refused', async () => {
    const hot = uniqueName('batch');
    const batch = (prefix: string, count: number) =>
      client.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [table]: Array.from({ length: count }, (_, i) => ({ PutRequest: { Item: itemOfSize(hot, `${prefix}${i}`, KB) } })),
          },
          ReturnConsumedCapacity: 'TOTAL',
        }),
      );
    const first = await batch('a', 25);
    expect(first.UnprocessedItems?.[table]).toHaveLength(5);
    expect(first.ConsumedCapacity).toEqual([{ TableName: table, CapacityUnits: 20 }]);
    expect((await failure(batch('b', 3))).name).toBe('ThrottlingException');
  });

  test('a refused condition consumes capacity too, and past the bucket the request is throttled instead', async () => {
    const pk = uniqueName('cond');
    await put(client, table, itemOfSize(pk, 'a', KB));
    const conditional = () =>
      client.send(new PutItemCommand({ TableName: table, Item: itemOfSize(pk, 'a', KB), ConditionExpression: 'attribute_not_exists(pk)' }));
    const { admitted, refusal } = await untilRefused(25, async () => {
      const err = await failure(conditional());
      if (err.name !== 'ConditionalCheckFailedException') throw err;
    });
    expect([admitted, refusal?.name]).toEqual([19, 'ThrottlingException']);
  });
});

describe.skipIf(onlyEmbedded)("a global index's writes on its own partitions", () => {
  const clock = manualClock();
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  let table: string;
  beforeAll(async () => {
    setup = await ownEngine({ now: clock.now, partitionLimits: { writeUnits: 20, readUnits: 20 } });
    ({ name: table } = await createTestTable(setup.client, {
      stream: false,
      attributes: [{ AttributeName: 'g', AttributeType: 'S' }],
      indexes: [{ IndexName: 'byG', KeySchema: [{ AttributeName: 'g', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } }],
    }));
  });
  afterAll(() => setup.engine.close());

  test('items of many table partitions in one index partition are throttled on the index, with its ARN', async () => {
    const g = { g: { S: uniqueName('hot') } };
    const { admitted, refusal } = await untilRefused(25, (i) => put(setup.client, table, itemOfSize(uniqueName(`p${i}`), 's', 500, g)));
    expect(admitted).toBe(20);
    expect(refusal?.message).toBe(
      'Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.',
    );
    expect(refusal?.throttlingReasons).toEqual([
      { reason: 'IndexWriteKeyRangeThroughputExceeded', resource: `arn:aws:dynamodb:us-east-1:000000000000:table/${table}/index/byG` },
    ]);
  });
});

describe.skipIf(onlyEmbedded)('a provisioned table', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  beforeAll(async () => {
    setup = await ownEngine({ now: manualClock().now, partitionLimits: { writeUnits: 2, readUnits: 2 } });
  });
  afterAll(() => setup.engine.close());

  test('is refused with ProvisionedThroughputExceededException and its ThrottlingReasons', async () => {
    const name = uniqueName('provisioned');
    await setup.client.send(
      new CreateTableCommand({
        TableName: name,
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 5 },
      }),
    );
    await waitFor(async () => (await setup.client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus === 'ACTIVE', {
      what: 'the table to become ACTIVE',
    });
    const { admitted, refusal } = await untilRefused(5, () =>
      setup.client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'a' } } })),
    );
    expect(admitted).toBe(2);
    expect(refusal?.name).toBe('ProvisionedThroughputExceededException');
    expect(refusal?.ThrottlingReasons).toEqual([
      { reason: 'TableWriteKeyRangeThroughputExceeded', resource: `arn:aws:dynamodb:us-east-1:000000000000:table/${name}` },
    ]);
  });
});

describe('consumed capacity, as DynamoDB reports it', () => {
  const client = dynamoClient({ maxAttempts: 1 });
  let table: string;
  beforeAll(async () => {
    ({ name: table } = await createTestTable(client, {
      stream: false,
      attributes: [{ AttributeName: 'g', AttributeType: 'S' }],
      indexes: [{ IndexName: 'byG', KeySchema: [{ AttributeName: 'g', KeyType: 'HASH' }], Projection: { ProjectionType: 'KEYS_ONLY' } }],
    }));
  });

  test('a put of 3 KB is 3 units; with INDEXES, the table and each index that took a write', async () => {
    const pk = uniqueName('put');
    const plain = await client.send(
      new PutItemCommand({ TableName: table, Item: itemOfSize(pk, 'a', 3 * KB), ReturnConsumedCapacity: 'TOTAL' }),
    );
    expect(plain.ConsumedCapacity).toMatchObject({ TableName: table, CapacityUnits: 3 });
    const indexed = await client.send(
      new PutItemCommand({ TableName: table, Item: itemOfSize(pk, 'b', 3 * KB, { g: { S: 'A' } }), ReturnConsumedCapacity: 'INDEXES' }),
    );
    // The index holds the keys only: one unit.
    expect(indexed.ConsumedCapacity).toMatchObject({
      TableName: table,
      CapacityUnits: 4,
      Table: { CapacityUnits: 3 },
      GlobalSecondaryIndexes: { byG: { CapacityUnits: 1 } },
    });
    // A changed index key deletes the old entry and puts the new one: two index writes.
    const moved = await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: pk }, sk: { S: 'b' } },
        UpdateExpression: 'SET g = :g',
        ExpressionAttributeValues: { ':g': { S: 'B' } },
        ReturnConsumedCapacity: 'INDEXES',
      }),
    );
    expect(moved.ConsumedCapacity).toMatchObject({
      CapacityUnits: 5,
      Table: { CapacityUnits: 3 },
      GlobalSecondaryIndexes: { byG: { CapacityUnits: 2 } },
    });
  });

  test('a transaction counts each item twice, per table', async () => {
    const pk = uniqueName('tx');
    const { ConsumedCapacity } = await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: itemOfSize(pk, 'a', KB) } },
          { Put: { TableName: table, Item: itemOfSize(pk, 'b', 2 * KB) } },
        ],
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    expect(ConsumedCapacity).toMatchObject([{ TableName: table, CapacityUnits: 6 }]);
  });
});
