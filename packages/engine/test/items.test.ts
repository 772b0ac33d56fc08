import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient, uniqueName } from './support/aws.ts';
import { failure } from './support/failure.ts';

const client = dynamoClient({ maxAttempts: 1 });
let table: string;

beforeAll(async () => {
  ({ name: table } = await createTestTable(client));
});

const key = (pk: string, sk = 'meta') => ({ pk: { S: pk }, sk: { S: sk } });

/** Resolves to the error a command fails with (fails the test if it succeeds). */

describe('conditional writes', () => {
  test('a put conditioned on absence succeeds once, then fails with ConditionalCheckFailedException', async () => {
    const pk = uniqueName();
    const put = () =>
      client.send(
        new PutItemCommand({ TableName: table, Item: { ...key(pk), v: { N: '1' } }, ConditionExpression: 'attribute_not_exists(pk)' }),
      );
    await put();
    const err = await failure(put());
    expect(err.name).toBe('ConditionalCheckFailedException');
    expect(err.message).toBe('The conditional request failed');
    expect(err.Item).toBeUndefined();
  });

  test('ReturnValuesOnConditionCheckFailure ALL_OLD returns the current item on put, update and delete', async () => {
    const pk = uniqueName();
    const current = { ...key(pk), owner: { S: 'A' }, token: { N: '7' } };
    await client.send(new PutItemCommand({ TableName: table, Item: current }));

    const onPut = await failure(
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: { ...key(pk), owner: { S: 'B' } },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(onPut.Item).toEqual(current);

    const onUpdate = await failure(
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(pk),
          UpdateExpression: 'SET #o = :b',
          ConditionExpression: '#o = :b',
          ExpressionAttributeNames: { '#o': 'owner' },
          ExpressionAttributeValues: { ':b': { S: 'B' } },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(onUpdate.name).toBe('ConditionalCheckFailedException');
    expect(onUpdate.Item).toEqual(current);

    const onDelete = await failure(
      client.send(
        new DeleteItemCommand({
          TableName: table,
          Key: key(pk),
          ConditionExpression: '#t > :n',
          ExpressionAttributeNames: { '#t': 'token' },
          ExpressionAttributeValues: { ':n': { N: '7' } },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(onDelete.Item).toEqual(current);

    // Nothing was changed by the refused writes.
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }));
    expect(Item).toEqual(current);
  });

  test('ReturnValuesOnConditionCheckFailure on an absent item returns no Item', async () => {
    const err = await failure(
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(uniqueName()),
          UpdateExpression: 'SET v = :v',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':v': { N: '1' } },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      ),
    );
    expect(err.name).toBe('ConditionalCheckFailedException');
    expect(err.Item).toBeUndefined();
  });

  test('an unknown ReturnValuesOnConditionCheckFailure is a ValidationException', async () => {
    const err = await failure(
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: key(uniqueName()),
          ReturnValuesOnConditionCheckFailure: 'SOME' as never,
        }),
      ),
    );
    expect(err.name).toBe('ValidationException');
    expect(err.message).toMatch(/returnValuesOnConditionCheckFailure/);
  });

  test('an update with a condition on a counter is one atomic step', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), spent: { N: '0' }, remaining: { N: '100' } } }));
    const charge = () =>
      client
        .send(
          new UpdateItemCommand({
            TableName: table,
            Key: key(pk),
            // Expressions have no arithmetic in conditions: the item keeps what is left.
            UpdateExpression: 'ADD spent :c, remaining :minus',
            ConditionExpression: 'remaining >= :c',
            ExpressionAttributeValues: { ':c': { N: '30' }, ':minus': { N: '-30' } },
          }),
        )
        .then(
          () => true,
          (err: Error) => {
            if (err.name !== 'ConditionalCheckFailedException') throw err;
            return false;
          },
        );
    const results = await Promise.all(Array.from({ length: 10 }, charge));
    expect(results.filter(Boolean)).toHaveLength(3);
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }));
    expect(Item?.spent).toEqual({ N: '90' });
    expect(Item?.remaining).toEqual({ N: '10' });
  });
});

describe('refusals', () => {
  test('a missing table is ResourceNotFoundException', async () => {
    const err = await failure(client.send(new GetItemCommand({ TableName: uniqueName('missing'), Key: key('x') })));
    expect(err.name).toBe('ResourceNotFoundException');
  });

  test('a key that does not match the schema is a ValidationException', async () => {
    const err = await failure(client.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'only-hash' } } })));
    expect(err.name).toBe('ValidationException');
    expect(err.message).toMatch(/Missing the key sk/);
  });

  test('a syntax error in a condition expression is a ValidationException naming it', async () => {
    const err = await failure(
      client.send(new PutItemCommand({ TableName: table, Item: key(uniqueName()), ConditionExpression: 'attribute_not_exists(' })),
    );
    expect(err.name).toBe('ValidationException');
    expect(err.message).toMatch(/ConditionExpression/);
  });

  test('duplicate keys in one BatchWriteItem are refused and nothing is written', async () => {
    const pk = uniqueName();
    const err = await failure(
      client.send(
        new BatchWriteItemCommand({
          RequestItems: { [table]: [{ PutRequest: { Item: key(pk) } }, { PutRequest: { Item: key(pk) } }] },
        }),
      ),
    );
    expect(err.name).toBe('ValidationException');
    expect(err.message).toBe('Provided list of item keys contains duplicates');
    const { Items } = await client.send(
      new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: pk } } }),
    );
    expect(Items).toEqual([]);
  });
});

test('BatchWriteItem puts and deletes', async () => {
  const pk = uniqueName();
  await client.send(new PutItemCommand({ TableName: table, Item: key(pk, 'gone') }));
  const result = await client.send(
    new BatchWriteItemCommand({
      RequestItems: {
        [table]: [
          { PutRequest: { Item: key(pk, 'a') } },
          { PutRequest: { Item: key(pk, 'b') } },
          { DeleteRequest: { Key: key(pk, 'gone') } },
        ],
      },
    }),
  );
  expect(result.UnprocessedItems).toEqual({});
  const { Items } = await client.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': { S: pk } },
      ConsistentRead: true,
    }),
  );
  expect(Items?.map((i) => i.sk?.S)).toEqual(['a', 'b']);
});

describe('expressions dynalite cannot evaluate on an item', () => {
  test('begins_with on two maps is a false condition, not a crash, and the item stays writable', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), m1: { M: {} }, m2: { M: {} } } }));
    const err = await failure(
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(pk),
          UpdateExpression: 'SET x = :x',
          ConditionExpression: 'begins_with(m1, m2)',
          ExpressionAttributeValues: { ':x': { S: '1' } },
        }),
      ),
    );
    expect(err.name).toBe('ConditionalCheckFailedException');
    // The item's lock was released: the next write goes through.
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), x: { S: '2' } } }));
    expect((await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }))).Item?.x).toEqual({ S: '2' });
  });

  test('a filter that cannot be evaluated answers the request instead of ending the engine', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), m1: { M: {} }, m2: { M: {} } } }));
    const outcome = await client
      .send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :p',
          FilterExpression: 'begins_with(m1, m2)',
          ExpressionAttributeValues: { ':p': { S: pk } },
        }),
      )
      .then(
        (result) => result.Items?.length,
        (err: Error) => err.name,
      );
    expect([0, 'ValidationException']).toContain(outcome);
    expect((await client.send(new GetItemCommand({ TableName: table, Key: key(pk) }))).Item).toBeDefined();
  });
});
