/** Table states and shutdown, on engines of the test's own. */
import { CreateTableCommand, GetItemCommand, PutItemCommand, UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, test } from 'vitest';
import { createTestTable } from './support/aws.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';

describe.skipIf(onlyEmbedded)('engine lifecycle', () => {
  test('a table still CREATING takes no writes', async () => {
    const { engine, client } = await ownEngine({ createTableMs: 1_000 });
    try {
      await client.send(
        new CreateTableCommand({
          TableName: 'creating',
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      expect((await failure(client.send(new PutItemCommand({ TableName: 'creating', Item: { pk: { S: 'x' } } })))).name).toBe(
        'ResourceNotFoundException',
      );
    } finally {
      await engine.close();
    }
  });

  test('UpdateTable without a TableName is a ValidationException', async () => {
    const { engine, client } = await ownEngine();
    try {
      const err = await failure(client.send(new UpdateTableCommand({ StreamSpecification: { StreamEnabled: false } } as never)));
      expect(err.name).toBe('ValidationException');
    } finally {
      await engine.close();
    }
  });

  test('close waits for requests in flight and refuses new ones', async () => {
    const { engine, client } = await ownEngine();
    const { name } = await createTestTable(client, { stream: false });
    await client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: 's' } } }));
    engine.faults.inject({ operations: ['GetItem'], latencyMs: 200, times: 1 });
    const slow = client.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'p' }, sk: { S: 's' } } }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const closed = engine.close();
    const late = client.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'p' }, sk: { S: 's' } } })).then(
      () => 'answered',
      (err: Error) => err.name,
    );
    expect((await slow).Item).toBeDefined();
    await closed;
    expect(await late).not.toBe('answered');
  });
});
