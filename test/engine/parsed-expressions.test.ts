/**
 * Parsed expressions are kept and reused only for the very same expressions, names and values:
 * a kept parse never answers another request's condition, a refusal is kept as a refusal, an
 * UpdateExpression is never kept, and the kept set stops at its bound.
 */
import { GetItemCommand, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { keepingParses } from '../../src/engine/parsed-expressions.ts';
import { createTestTable, dynamoClient, uniqueName } from '../support/aws.ts';

const client = dynamoClient({ maxAttempts: 1 });
let table: string;
beforeAll(async () => {
  ({ name: table } = await createTestTable(client));
});
const key = (pk: string) => ({ pk: { S: pk }, sk: { S: 'meta' } });

describe('through the engine', () => {
  test('one condition text with other values is judged on each request`s own values', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), v: { N: '1' } } }));
    const putIf = (expected: string, next: string) =>
      client
        .send(
          new PutItemCommand({
            TableName: table,
            Item: { ...key(pk), v: { N: next } },
            ConditionExpression: '#v = :v',
            ExpressionAttributeNames: { '#v': 'v' },
            ExpressionAttributeValues: { ':v': { N: expected } },
          }),
        )
        .then(
          () => 'written',
          (err: Error) => err.name,
        );
    for (let round = 0; round < 3; round++) {
      expect(await putIf(String(round + 1), String(round + 2))).toBe('written');
      // The same text and values again: the value moved on, so now it fails.
      expect(await putIf(String(round + 1), '99')).toBe('ConditionalCheckFailedException');
    }
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }));
    expect(Item?.v).toEqual({ N: '4' });
  });

  test('a refused expression is refused every time, with the same message; updates apply their own values', async () => {
    const bad = () =>
      client
        .send(new PutItemCommand({ TableName: table, Item: key(uniqueName()), ConditionExpression: 'attribute_not_exists(pk) AND' }))
        .catch((err: Error) => err.message);
    const first = await bad();
    expect(first).toMatch(/Invalid ConditionExpression/);
    expect(await bad()).toBe(first);
    const pk = uniqueName();
    for (let i = 1; i <= 3; i++)
      await client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(pk),
          UpdateExpression: 'ADD #n :by',
          ExpressionAttributeNames: { '#n': 'n' },
          ExpressionAttributeValues: { ':by': { N: String(i) } },
        }),
      );
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }));
    expect(Item?.n).toEqual({ N: '6' });
  });
});

describe('the kept parses on their own', () => {
  test('reused for the same request, not for another; bounded', () => {
    let parses = 0;
    const validate = keepingParses((data) => {
      parses++;
      data._condition = { parsedFrom: data.ConditionExpression };
      return undefined;
    });
    const a = { ConditionExpression: 'attribute_not_exists(pk)' } as Record<string, unknown>;
    validate(a);
    const again = { ConditionExpression: 'attribute_not_exists(pk)' } as Record<string, unknown>;
    validate(again);
    expect(parses).toBe(1);
    expect(again._condition).toEqual({ parsedFrom: 'attribute_not_exists(pk)' });
    validate({ ConditionExpression: 'attribute_not_exists(pk)', ExpressionAttributeValues: { ':x': { N: '1' } } });
    validate({ UpdateExpression: 'SET a = :x', ExpressionAttributeValues: { ':x': { N: '1' } } });
    validate({ UpdateExpression: 'SET a = :x', ExpressionAttributeValues: { ':x': { N: '1' } } });
    expect(parses).toBe(4);
    for (let i = 0; i < 2_500; i++) validate({ ConditionExpression: `#a = :v${i}` });
    expect(validate.size).toBeLessThanOrEqual(2_000);
    expect(validate.hits).toBe(1);
  });
});
