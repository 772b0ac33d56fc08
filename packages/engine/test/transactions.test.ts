import {
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactGetItemsCommand,
  type TransactWriteItem,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient, readStream, streamsClient, uniqueName } from './support/aws.ts';
import { failure } from './support/failure.ts';

const client = dynamoClient({ maxAttempts: 1 });
let table: string;
let streamArn: string;

beforeAll(async () => {
  const created = await createTestTable(client);
  table = created.name;
  streamArn = created.streamArn as string;
});

const key = (pk: string, sk = 'a') => ({ pk: { S: pk }, sk: { S: sk } });

const get = async (k: ReturnType<typeof key>) =>
  (await client.send(new GetItemCommand({ TableName: table, Key: k, ConsistentRead: true }))).Item;

describe('TransactWriteItems', () => {
  test('applies Put, Update, Delete and ConditionCheck together', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk, 'meta'), status: { S: 'RUNNING' } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk, 'budget'), spent: { N: '0' } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: key(pk, 'old') }));
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            ConditionCheck: {
              TableName: table,
              Key: key(pk, 'meta'),
              ConditionExpression: '#s = :running',
              ExpressionAttributeNames: { '#s': 'status' },
              ExpressionAttributeValues: { ':running': { S: 'RUNNING' } },
            },
          },
          { Put: { TableName: table, Item: { ...key(pk, 'evt#1'), type: { S: 'x' } }, ConditionExpression: 'attribute_not_exists(pk)' } },
          {
            Update: {
              TableName: table,
              Key: key(pk, 'budget'),
              UpdateExpression: 'ADD spent :c',
              ExpressionAttributeValues: { ':c': { N: '5' } },
            },
          },
          { Delete: { TableName: table, Key: key(pk, 'old') } },
        ],
      }),
    );
    expect(await get(key(pk, 'evt#1'))).toEqual({ ...key(pk, 'evt#1'), type: { S: 'x' } });
    expect((await get(key(pk, 'budget')))?.spent).toEqual({ N: '5' });
    expect(await get(key(pk, 'old'))).toBeUndefined();
  });

  test('one failed condition cancels everything, with a reason per action and the item when asked', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk, 'evt#1'), type: { S: 'first' } } }));
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk, 'budget'), spent: { N: '0' } } }));
    const err = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Update: {
                TableName: table,
                Key: key(pk, 'budget'),
                UpdateExpression: 'ADD spent :c',
                ExpressionAttributeValues: { ':c': { N: '5' } },
              },
            },
            {
              Put: {
                TableName: table,
                Item: { ...key(pk, 'evt#1'), type: { S: 'second' } },
                ConditionExpression: 'attribute_not_exists(pk)',
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      ),
    );
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.message).toMatch(/\[None, ConditionalCheckFailed\]/);
    expect(err.CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: { ...key(pk, 'evt#1'), type: { S: 'first' } } },
    ]);
    expect((await get(key(pk, 'budget')))?.spent).toEqual({ N: '0' });
  });

  test('two actions on one item are refused with ValidationException', async () => {
    const pk = uniqueName();
    const err = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ Put: { TableName: table, Item: key(pk) } }, { Delete: { TableName: table, Key: key(pk) } }],
        }),
      ),
    );
    expect(err.name).toBe('ValidationException');
    expect(err.message).toBe('Transaction request cannot include multiple operations on one item');
    expect(await get(key(pk))).toBeUndefined();
  });

  test('more than 100 actions are refused with ValidationException', async () => {
    const pk = uniqueName();
    const items: TransactWriteItem[] = Array.from({ length: 101 }, (_, i) => ({ Put: { TableName: table, Item: key(pk, String(i)) } }));
    const err = await failure(client.send(new TransactWriteItemsCommand({ TransactItems: items })));
    expect(err.name).toBe('ValidationException');
    expect(err.message).toMatch(/transactItems.*less than or equal to 100/);
    expect(await get(key(pk, '0'))).toBeUndefined();
  });

  test('exactly 100 actions are accepted', async () => {
    const pk = uniqueName();
    const items: TransactWriteItem[] = Array.from({ length: 100 }, (_, i) => ({ Put: { TableName: table, Item: key(pk, String(i)) } }));
    await client.send(new TransactWriteItemsCommand({ TransactItems: items }));
    const { Count } = await client.send(
      new QueryCommand({
        TableName: table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': { S: pk } },
        ConsistentRead: true,
      }),
    );
    expect(Count).toBe(100);
  });

  test('an Update without UpdateExpression, or a ConditionCheck without ConditionExpression, is a ValidationException', async () => {
    const pk = uniqueName();
    for (const item of [
      { Update: { TableName: table, Key: key(pk) } },
      { ConditionCheck: { TableName: table, Key: key(pk) } },
    ] as unknown as TransactWriteItem[]) {
      const err = await failure(
        client.send(new TransactWriteItemsCommand({ TransactItems: [item, { Put: { TableName: table, Item: key(pk, 'x') } }] })),
      );
      expect(err.name).toBe('ValidationException');
      expect(err.message).toMatch(/Expression.*must not be null/);
    }
    expect(await get(key(pk, 'x'))).toBeUndefined();
  });

  test('a condition that cannot be evaluated on the item counts as failed', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), m1: { M: {} }, m2: { M: {} } } }));
    const err = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { ConditionCheck: { TableName: table, Key: key(pk), ConditionExpression: 'begins_with(m1, m2)' } },
            { Put: { TableName: table, Item: key(pk, 'y') } },
          ],
        }),
      ),
    );
    expect(err.name).toBe('TransactionCanceledException');
    expect((err.CancellationReasons as { Code: string }[])[0]?.Code).toBe('ConditionalCheckFailed');
    expect(await get(key(pk, 'y'))).toBeUndefined();
  });

  test("a check after a put is judged by its own condition, not the put's", async () => {
    const pk = uniqueName();
    // The put's condition would throw on the checked item (begins_with on two maps), never on its own.
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), m1: { M: {} }, m2: { M: {} } } }));
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: key(pk, 'y'), ConditionExpression: 'attribute_not_exists(pk) OR begins_with(m1, m2)' } },
          { ConditionCheck: { TableName: table, Key: key(pk), ConditionExpression: 'attribute_exists(pk)' } },
        ],
      }),
    );
    expect(await get(key(pk, 'y'))).toEqual(key(pk, 'y'));
  });

  test("a member's own checks still refuse it: table name, required members, its expressions", async () => {
    const pk = uniqueName();
    const refusal = async (member: TransactWriteItem) =>
      failure(client.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: table, Item: key(pk) } }, member] })));
    const messages = {
      pattern: await refusal({ Put: { TableName: 'no spaces!', Item: key(pk, 'b') } }),
      short: await refusal({ Put: { TableName: 'ab', Item: key(pk, 'b') } }),
      missing: await refusal({ Put: { Item: key(pk, 'b') } as never }),
      unparsable: await refusal({ Put: { TableName: table, Item: key(pk, 'b'), ConditionExpression: 'attribute_not_exists(' } }),
    };
    const at = "at 'transactItems.2.member.put.tableName' failed to satisfy constraint: Member must";
    expect(Object.fromEntries(Object.entries(messages).map(([what, err]) => [what, `${err.name}: ${err.message}`]))).toEqual({
      pattern: `ValidationException: 1 validation error detected: Value 'no spaces!' ${at} satisfy regular expression pattern: [a-zA-Z0-9_.-]+`,
      short: `ValidationException: 1 validation error detected: Value 'ab' ${at} have length greater than or equal to 3`,
      missing: `ValidationException: 1 validation error detected: Value null ${at} not be null`,
      unparsable: expect.stringMatching(/^ValidationException: Invalid ConditionExpression: Syntax error/),
    });
    expect(await get(key(pk))).toBeUndefined();
  });

  test('an action on a missing table refuses the whole transaction', async () => {
    const pk = uniqueName();
    const err = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ Put: { TableName: table, Item: key(pk) } }, { Put: { TableName: uniqueName('missing'), Item: key(pk) } }],
        }),
      ),
    );
    expect(err.name).toBe('ResourceNotFoundException');
    expect(await get(key(pk))).toBeUndefined();
  });

  test('a ClientRequestToken makes a retry return success without applying again', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), n: { N: '0' } } }));
    const increment = (token: string, by = '1') =>
      client.send(
        new TransactWriteItemsCommand({
          ClientRequestToken: token,
          TransactItems: [
            { Update: { TableName: table, Key: key(pk), UpdateExpression: 'ADD n :by', ExpressionAttributeValues: { ':by': { N: by } } } },
          ],
        }),
      );
    const token = uniqueName('token');
    await increment(token);
    await increment(token);
    expect((await get(key(pk)))?.n).toEqual({ N: '1' });

    const mismatch = await failure(increment(token, '2'));
    expect(mismatch.name).toBe('IdempotentParameterMismatchException');
    expect((await get(key(pk)))?.n).toEqual({ N: '1' });
    // A request that is not valid is refused as such first, whatever its token.
    const invalid = await failure(
      client.send(
        new TransactWriteItemsCommand({
          ClientRequestToken: token,
          TransactItems: [{ Update: { TableName: table, Key: key(pk), UpdateExpression: 'ADD n :by', ExpressionAttributeValues: {} } }],
        }),
      ),
    );
    expect(invalid.name).toBe('ValidationException');
    // ...and leaves the token as it was.
    await increment(token);
    expect((await get(key(pk)))?.n).toEqual({ N: '1' });

    await increment(uniqueName('token'));
    expect((await get(key(pk)))?.n).toEqual({ N: '2' });
  });

  test('concurrent calls with one ClientRequestToken apply once; the others succeed or are told it is in progress', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), n: { N: '0' } } }));
    const token = uniqueName('token');
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () =>
        client
          .send(
            new TransactWriteItemsCommand({
              ClientRequestToken: token,
              TransactItems: [
                {
                  Update: {
                    TableName: table,
                    Key: key(pk),
                    UpdateExpression: 'ADD n :one',
                    ExpressionAttributeValues: { ':one': { N: '1' } },
                  },
                },
              ],
            }),
          )
          .then(
            () => 'ok',
            (err: Error) => err.name,
          ),
      ),
    );
    expect(outcomes).toContain('ok');
    expect(outcomes.filter((o) => o !== 'ok' && o !== 'TransactionInProgressException')).toEqual([]);
    expect((await get(key(pk)))?.n).toEqual({ N: '1' });
  });

  test('a transaction produces one stream record per changed item', async () => {
    const pk = uniqueName();
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [{ Put: { TableName: table, Item: key(pk, 'x') } }, { Put: { TableName: table, Item: key(pk, 'y') } }],
      }),
    );
    const mine = (
      await readStream(streamsClient(), streamArn, (all) => all.filter((r) => r.dynamodb?.Keys?.pk?.S === pk).length >= 2)
    ).filter((r) => r.dynamodb?.Keys?.pk?.S === pk);
    expect(mine.map((r) => [r.eventName, r.dynamodb?.Keys?.sk?.S])).toEqual([
      ['INSERT', 'x'],
      ['INSERT', 'y'],
    ]);
  });
});

describe('a Put in a transaction, like PutItem', () => {
  let indexed: { name: string; streamArn?: string };
  beforeAll(async () => {
    indexed = await createTestTable(client, {
      attributes: [
        { AttributeName: 'status', AttributeType: 'S' },
        { AttributeName: 'at', AttributeType: 'S' },
      ],
      indexes: [
        {
          IndexName: 'byStatus',
          KeySchema: [
            { AttributeName: 'status', KeyType: 'HASH' },
            { AttributeName: 'at', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
      ],
    });
  });
  const byStatus = async (status: string) =>
    (
      await client.send(
        new QueryCommand({
          TableName: indexed.name,
          IndexName: 'byStatus',
          KeyConditionExpression: '#s = :s',
          ExpressionAttributeNames: { '#s': 'status' },
          ExpressionAttributeValues: { ':s': { S: status } },
        }),
      )
    ).Items ?? [];
  const putAlone = (item: Record<string, unknown>, check: string) =>
    client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: indexed.name, Item: item as never } },
          { ConditionCheck: { TableName: indexed.name, Key: key(check, 'c'), ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
      }),
    );

  test('moves the item in its index, drops it when the index key goes, and streams both images', async () => {
    const pk = uniqueName();
    const [running, waiting] = [`RUNNING-${pk}`, `WAITING-${pk}`];
    const first = { ...key(pk), status: { S: running }, at: { S: '1' } };
    const second = { ...key(pk), status: { S: waiting }, at: { S: '2' }, note: { S: 'moved' } };
    await putAlone(first, pk);
    expect(await byStatus(running)).toEqual([first]);
    await putAlone(second, pk);
    expect(await byStatus(running)).toEqual([]);
    expect(await byStatus(waiting)).toEqual([second]);
    // Without the index's key attributes the item leaves the index.
    await putAlone(key(pk), pk);
    expect(await byStatus(waiting)).toEqual([]);
    const mine = (
      await readStream(streamsClient(), indexed.streamArn as string, (all) => all.filter((r) => r.dynamodb?.Keys?.pk?.S === pk).length >= 3)
    ).filter((r) => r.dynamodb?.Keys?.pk?.S === pk);
    expect(mine.map((r) => [r.eventName, r.dynamodb?.OldImage?.status?.S, r.dynamodb?.NewImage?.status?.S])).toEqual([
      ['INSERT', undefined, running],
      ['MODIFY', running, waiting],
      ['MODIFY', waiting, undefined],
    ]);
  });

  test('a Put whose own condition fails gives the item it found when asked', async () => {
    const pk = uniqueName();
    const item = { ...key(pk), status: { S: `FIRST-${pk}` }, at: { S: '1' } };
    await putAlone(item, pk);
    const err = await failure(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Put: {
                TableName: indexed.name,
                Item: { ...key(pk), status: { S: `SECOND-${pk}` }, at: { S: '2' } },
                ConditionExpression: 'attribute_not_exists(pk)',
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      ),
    );
    expect(err.CancellationReasons).toEqual([{ Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: item }]);
    expect(await byStatus(`SECOND-${pk}`)).toEqual([]);
  });

  test('a refused Put leaves the index as it was', async () => {
    const pk = uniqueName();
    const item = { ...key(pk), status: { S: `KEPT-${pk}` }, at: { S: '1' } };
    await putAlone(item, pk);
    await client.send(new PutItemCommand({ TableName: indexed.name, Item: key(pk, 'c') }));
    const err = await failure(putAlone({ ...key(pk), status: { S: `LOST-${pk}` }, at: { S: '2' } }, pk));
    expect(err.name).toBe('TransactionCanceledException');
    expect(await byStatus(`KEPT-${pk}`)).toEqual([item]);
    expect(await byStatus(`LOST-${pk}`)).toEqual([]);
  });
});

describe("DynamoDB's validation of transaction members", () => {
  const put = (item: Record<string, unknown>) => ({ Put: { TableName: table, Item: item } }) as TransactWriteItem;
  const reasonsOf = (err: Record<string, unknown>) => err.CancellationReasons as { Code: string; Message?: string }[];
  const schemaMismatch = 'The provided key element does not match the schema';
  const emptyKey =
    'One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: pk';

  test('a Put whose key has the wrong type cancels with a ValidationError reason for that action', async () => {
    const pk = uniqueName();
    const err = await failure(
      client.send(new TransactWriteItemsCommand({ TransactItems: [put(key(pk, 'ok')), put({ pk: { N: '5' }, sk: { S: 'a' } })] })),
    );
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.message).toBe('Transaction cancelled, please refer cancellation reasons for specific reasons [None, ValidationError]');
    expect(reasonsOf(err)).toEqual([
      { Code: 'None' },
      { Code: 'ValidationError', Message: 'One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N' },
    ]);
    expect(await get(key(pk, 'ok'))).toBeUndefined();
  });

  test.each([
    [
      'Update',
      (k: Record<string, unknown>) => ({
        Update: { TableName: table, Key: k, UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'x' } } },
      }),
    ],
    ['Delete', (k: Record<string, unknown>) => ({ Delete: { TableName: table, Key: k } })],
    [
      'ConditionCheck',
      (k: Record<string, unknown>) => ({ ConditionCheck: { TableName: table, Key: k, ConditionExpression: 'attribute_exists(pk)' } }),
    ],
  ])('a %s whose key has the wrong type or misses an attribute cancels with a ValidationError reason', async (_, action) => {
    for (const badKey of [{ pk: { N: '5' }, sk: { S: 'a' } }, { pk: { S: 'p' } }, { pk: { L: [{ S: 'x' }] }, sk: { S: 'a' } }]) {
      const err = await failure(client.send(new TransactWriteItemsCommand({ TransactItems: [action(badKey) as TransactWriteItem] })));
      expect(err.name).toBe('TransactionCanceledException');
      expect(reasonsOf(err)).toEqual([{ Code: 'ValidationError', Message: schemaMismatch }]);
    }
  });

  test('an empty string key value refuses the whole request with ValidationException', async () => {
    const pk = uniqueName();
    for (const bad of [
      put({ pk: { S: '' }, sk: { S: 'a' } }),
      { Delete: { TableName: table, Key: { pk: { S: '' }, sk: { S: 'a' } } } } as TransactWriteItem,
    ]) {
      const err = await failure(client.send(new TransactWriteItemsCommand({ TransactItems: [put(key(pk)), bad] })));
      expect(err.name).toBe('ValidationException');
      expect(err.message).toBe(emptyKey);
    }
    expect(await get(key(pk))).toBeUndefined();
  });

  test('TransactGetItems: a key of the wrong shape cancels with ValidationError, an empty value refuses the request', async () => {
    const wrong = await failure(
      client.send(
        new TransactGetItemsCommand({
          TransactItems: [
            { Get: { TableName: table, Key: key('x') } },
            { Get: { TableName: table, Key: { pk: { N: '1' }, sk: { S: 'a' } } } },
          ],
        }),
      ),
    );
    expect(wrong.name).toBe('TransactionCanceledException');
    expect(reasonsOf(wrong)).toEqual([{ Code: 'None' }, { Code: 'ValidationError', Message: schemaMismatch }]);
    const missing = await failure(client.send(new TransactGetItemsCommand({ TransactItems: [{ Get: { TableName: table, Key: {} } }] })));
    expect(reasonsOf(missing).map((r) => r.Code)).toEqual(['ValidationError']);
    const empty = await failure(
      client.send(new TransactGetItemsCommand({ TransactItems: [{ Get: { TableName: table, Key: { pk: { S: '' }, sk: { S: 'a' } } } }] })),
    );
    expect(empty.name).toBe('ValidationException');
    expect(empty.message).toBe(emptyKey);
  });

  test('TransactGetItems: two reads of one item are refused with ValidationException', async () => {
    const err = await failure(
      client.send(
        new TransactGetItemsCommand({
          TransactItems: [{ Get: { TableName: table, Key: key('dup') } }, { Get: { TableName: table, Key: key('dup') } }],
        }),
      ),
    );
    expect(err.name).toBe('ValidationException');
  });

  test('items over 4 MB in all are refused with ValidationException; just under is accepted', async () => {
    const pk = uniqueName();
    const big = (i: number) => put({ ...key(pk, String(i).padStart(2, '0')), blob: { S: 'x'.repeat(390 * 1024) } });
    const over = await failure(client.send(new TransactWriteItemsCommand({ TransactItems: Array.from({ length: 11 }, (_, i) => big(i)) })));
    expect(over.name).toBe('ValidationException');
    expect(await get(key(pk, '00'))).toBeUndefined();

    await client.send(new TransactWriteItemsCommand({ TransactItems: Array.from({ length: 10 }, (_, i) => big(i)) }));
    await client.send(new TransactWriteItemsCommand({ TransactItems: [big(10)] }));
    // An Update is measured by the item it leaves: ten big Puts and one that grows an item are over.
    const grow = {
      Update: {
        TableName: table,
        Key: key(pk, 'grown'),
        UpdateExpression: 'SET #b = :b',
        ExpressionAttributeNames: { '#b': 'blob' },
        ExpressionAttributeValues: { ':b': { S: 'y'.repeat(390 * 1024) } },
      },
    };
    const grown = await failure(
      client.send(new TransactWriteItemsCommand({ TransactItems: [...Array.from({ length: 10 }, (_, i) => big(20 + i)), grow] })),
    );
    expect(grown.name).toBe('ValidationException');
    expect(grown.message).toMatch(/exceeds the limit of 4 MB/);
    expect(await get(key(pk, 'grown'))).toBeUndefined();
    // Reading them all back in one transaction is over the limit too.
    const read = await failure(
      client.send(
        new TransactGetItemsCommand({
          TransactItems: Array.from({ length: 11 }, (_, i) => ({ Get: { TableName: table, Key: key(pk, String(i).padStart(2, '0')) } })),
        }),
      ),
    );
    expect(read.name).toBe('ValidationException');
  });
});

describe('TransactGetItems', () => {
  test('reads several items at once, absent ones as empty responses', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk, 'a'), v: { N: '1' }, w: { N: '2' } } }));
    const { Responses } = await client.send(
      new TransactGetItemsCommand({
        TransactItems: [
          { Get: { TableName: table, Key: key(pk, 'a'), ProjectionExpression: 'v' } },
          { Get: { TableName: table, Key: key(pk, 'missing') } },
        ],
      }),
    );
    expect(Responses).toEqual([{ Item: { v: { N: '1' } } }, {}]);
  });
});

test('no reader ever sees half a transaction, while transfers and reads run concurrently', async () => {
  const pk = uniqueName();
  await client.send(
    new TransactWriteItemsCommand({
      TransactItems: [
        { Put: { TableName: table, Item: { ...key(pk, 'left'), v: { N: '100' } } } },
        { Put: { TableName: table, Item: { ...key(pk, 'right'), v: { N: '100' } } } },
      ],
    }),
  );
  const transfer = (amount: number) =>
    client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          {
            Update: {
              TableName: table,
              Key: key(pk, 'left'),
              UpdateExpression: 'ADD v :a',
              ExpressionAttributeValues: { ':a': { N: String(-amount) } },
            },
          },
          {
            Update: {
              TableName: table,
              Key: key(pk, 'right'),
              UpdateExpression: 'ADD v :a',
              ExpressionAttributeValues: { ':a': { N: String(amount) } },
            },
          },
        ],
      }),
    );
  const sums: number[] = [];
  let writing = true;
  const readers = Array.from({ length: 4 }, async (_, reader) => {
    while (writing) {
      if (reader % 2 === 0) {
        const { Responses } = await client.send(
          new TransactGetItemsCommand({
            TransactItems: [{ Get: { TableName: table, Key: key(pk, 'left') } }, { Get: { TableName: table, Key: key(pk, 'right') } }],
          }),
        );
        sums.push(Number(Responses?.[0]?.Item?.v?.N) + Number(Responses?.[1]?.Item?.v?.N));
      } else {
        const { Items } = await client.send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: 'pk = :p',
            ExpressionAttributeValues: { ':p': { S: pk } },
            ConsistentRead: true,
          }),
        );
        sums.push((Items ?? []).reduce((sum, item) => sum + Number(item.v?.N), 0));
      }
    }
  });
  // Also contend with single-item writes on the same items: they must wait for the transactions.
  const writers = Array.from({ length: 8 }, async (_, w) => {
    for (let i = 0; i < 25; i++) await transfer(((w + i) % 7) - 3);
  });
  const touches = (async () => {
    for (let i = 0; i < 25; i++) {
      await client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(pk, 'left'),
          UpdateExpression: 'SET touched = :t',
          ExpressionAttributeValues: { ':t': { N: String(i) } },
        }),
      );
    }
  })();
  await Promise.all([...writers, touches]);
  writing = false;
  await Promise.all(readers);
  expect(sums.length).toBeGreaterThan(20);
  expect(sums.filter((s) => s !== 200)).toEqual([]);
});
