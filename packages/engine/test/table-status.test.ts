/**
 * A table being created is not there yet for item requests: DynamoDB answers them
 * ResourceNotFoundException until the table is ACTIVE. The engine's table delay
 * (`--table-delay`, `createTableMs`) keeps a new table CREATING that long.
 */
import {
  CreateTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from './support/aws.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const create = (name: string) =>
  new CreateTableCommand({
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
  });

describe.skipIf(onlyEmbedded)('a table being created', () => {
  let slow: Awaited<ReturnType<typeof ownEngine>>;
  let quick: Awaited<ReturnType<typeof ownEngine>>;
  beforeAll(async () => {
    // Long enough that the table is still CREATING whenever the test looks.
    slow = await ownEngine({ createTableMs: 10 * 60_000 });
    quick = await ownEngine({ createTableMs: 200 });
  });
  afterAll(async () => {
    await slow.engine.close();
    await quick.engine.close();
  });

  test('is CREATING, and every item request on it is ResourceNotFoundException', async () => {
    const name = uniqueName();
    const { TableDescription } = await slow.client.send(create(name));
    expect(TableDescription?.TableStatus).toBe('CREATING');
    expect((await slow.client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus).toBe('CREATING');
    const key = { pk: { S: 'a' } };
    const requests = [
      new PutItemCommand({ TableName: name, Item: key }),
      new GetItemCommand({ TableName: name, Key: key }),
      new UpdateItemCommand({ TableName: name, Key: key, UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': { N: '1' } } }),
      new QueryCommand({ TableName: name, KeyConditionExpression: 'pk = :a', ExpressionAttributeValues: { ':a': { S: 'a' } } }),
      new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: name, Item: key } }] }),
    ];
    for (const command of requests) {
      const err = await failure(slow.client.send(command as Parameters<typeof slow.client.send>[0]));
      expect(err.name).toBe('ResourceNotFoundException');
    }
  });

  test('serves item requests once ACTIVE', async () => {
    const name = uniqueName();
    await quick.client.send(create(name));
    await waitFor(async () => (await quick.client.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus === 'ACTIVE', {
      what: 'the table to become ACTIVE',
    });
    await quick.client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'late' } } }));
    const { Item } = await quick.client.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'late' } } }));
    expect(Item).toEqual({ pk: { S: 'late' } });
  });
});
