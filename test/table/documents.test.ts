/**
 * The stores' document client (table/documents.ts) gives what lib-dynamodb's gives, command by
 * command, through a client that resolves its middleware once per kind of command: the same
 * items in and out (numbers past 2^53, nested payloads, absent members), the same answers to
 * conditions that fail, and lib-dynamodb itself for a command it does not translate.
 */
import { ConditionalCheckFailedException, DynamoDBClient, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { marshallOptions, unmarshallOptions } from '../../src/table/client.ts';
import { createDocuments, type Documents } from '../../src/table/documents.ts';
import { createTestTable, dynamoClient, uniqueName } from '../support/aws.ts';

const plain = dynamoClient();
const cached = new DynamoDBClient({
  endpoint: inject('dynamodbEndpoint'),
  region: 'us-east-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  cacheMiddleware: true,
});
const reference = DynamoDBDocumentClient.from(plain, {
  marshallOptions: { ...marshallOptions },
  unmarshallOptions: { ...unmarshallOptions },
});
let documents: Documents;
let table: string;
beforeAll(async () => {
  ({ name: table } = await createTestTable(plain));
  documents = createDocuments(cached, plain, { marshallOptions, unmarshallOptions });
});
afterAll(() => {
  cached.destroy();
});

const payload = { big: 2 ** 60, nested: { list: [1, 'two', { three: null }], empty: {} }, flag: true, text: 'é\u0000', gone: undefined };
const item = (pk: string, sk: string) => ({ pk, sk, payload, n: 7 });

describe('the stores` document client', () => {
  test('puts and gets items as lib-dynamodb does, either one reading what the other wrote', async () => {
    const pk = uniqueName();
    await documents.send(new PutCommand({ TableName: table, Item: item(pk, 'a') }));
    await reference.send(new PutCommand({ TableName: table, Item: item(pk, 'b') }));
    for (const sk of ['a', 'b']) {
      const ours = await documents.send(new GetCommand({ TableName: table, Key: { pk, sk }, ConsistentRead: true }));
      const theirs = await reference.send(new GetCommand({ TableName: table, Key: { pk, sk }, ConsistentRead: true }));
      expect(ours.Item).toEqual(theirs.Item);
      expect(ours.Item).toEqual({ pk, sk, n: 7, payload: { ...payload, gone: undefined } });
    }
    expect((await documents.send(new GetCommand({ TableName: table, Key: { pk, sk: 'none' } }))).Item).toBeUndefined();
  });

  test('an update returns the item it left; a delete the one it removed', async () => {
    const pk = uniqueName();
    await documents.send(new PutCommand({ TableName: table, Item: item(pk, 'u') }));
    const updated = await documents.send(
      new UpdateCommand({
        TableName: table,
        Key: { pk, sk: 'u' },
        UpdateExpression: 'SET #n = #n + :by, tags = :tags',
        ConditionExpression: '#n = :n',
        ExpressionAttributeNames: { '#n': 'n' },
        ExpressionAttributeValues: { ':by': 3, ':n': 7, ':tags': ['x', { y: 1 }] },
        ReturnValues: 'ALL_NEW',
      }),
    );
    expect(updated.Attributes).toMatchObject({ pk, sk: 'u', n: 10, tags: ['x', { y: 1 }] });
    const deleted = await documents.send(new DeleteCommand({ TableName: table, Key: { pk, sk: 'u' }, ReturnValues: 'ALL_OLD' }));
    expect(deleted.Attributes).toEqual(updated.Attributes);
  });

  test('a failed condition is the SDK`s error, with the item it found as DynamoDB gives it', async () => {
    const pk = uniqueName();
    await documents.send(new PutCommand({ TableName: table, Item: item(pk, 'c') }));
    const failed = (doc: Documents) =>
      doc
        .send(
          new PutCommand({
            TableName: table,
            Item: item(pk, 'c'),
            ConditionExpression: 'attribute_not_exists(pk)',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        )
        .catch((err: unknown) => err);
    const [ours, theirs] = await Promise.all([failed(documents), failed(reference)]);
    expect(ours).toBeInstanceOf(ConditionalCheckFailedException);
    expect((ours as ConditionalCheckFailedException).Item).toEqual((theirs as ConditionalCheckFailedException).Item);
  });

  test('a query pages as lib-dynamodb does, its start key given back as it came', async () => {
    const pk = uniqueName();
    for (let i = 0; i < 5; i++) await documents.send(new PutCommand({ TableName: table, Item: item(pk, `s${i}`) }));
    const pages = async (doc: Documents) => {
      const seen: unknown[][] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: 'pk = :pk AND sk > :from',
            ExpressionAttributeValues: { ':pk': pk, ':from': 's0' },
            Limit: 2,
            ExclusiveStartKey: start,
          }),
        );
        seen.push(page.Items ?? []);
        start = page.LastEvaluatedKey;
      } while (start);
      return seen;
    };
    const ours = await pages(documents);
    expect(ours).toEqual(await pages(reference));
    expect(ours.flat().map((found) => (found as { sk: string }).sk)).toEqual(['s1', 's2', 's3', 's4']);
  });

  test('a batch get and a transaction', async () => {
    const pk = uniqueName();
    await documents.send(
      new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: table, Item: item(pk, 't1'), ConditionExpression: 'attribute_not_exists(pk)' } },
          {
            Update: {
              TableName: table,
              Key: { pk, sk: 't2' },
              UpdateExpression: 'SET v = :v',
              ExpressionAttributeValues: { ':v': { deep: [2 ** 55] } },
            },
          },
        ],
      }),
    );
    const { Responses } = await documents.send(
      new BatchGetCommand({
        RequestItems: {
          [table]: {
            Keys: [
              { pk, sk: 't1' },
              { pk, sk: 't2' },
            ],
            ConsistentRead: true,
          },
        },
      }),
    );
    const found = (Responses?.[table] ?? []).sort((a, b) => String(a.sk).localeCompare(String(b.sk)));
    expect(found).toEqual([
      { pk, sk: 't1', n: 7, payload: { ...payload, gone: undefined } },
      { pk, sk: 't2', v: { deep: [2 ** 55] } },
    ]);
    const refused = await documents
      .send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: table, Item: item(pk, 't3') } },
            {
              ConditionCheck: {
                TableName: table,
                Key: { pk, sk: 't1' },
                ConditionExpression: 'n = :n',
                ExpressionAttributeValues: { ':n': 8 },
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
          ],
        }),
      )
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(TransactionCanceledException);
    expect((refused as TransactionCanceledException).CancellationReasons?.[1]?.Item?.n).toEqual({ N: '7' });
    expect((await documents.send(new GetCommand({ TableName: table, Key: { pk, sk: 't3' }, ConsistentRead: true }))).Item).toBeUndefined();
  });

  test('a command it does not translate goes through lib-dynamodb', async () => {
    const pk = uniqueName();
    await documents.send(new PutCommand({ TableName: table, Item: item(pk, 'scan') }));
    const { Items } = await documents.send(
      new ScanCommand({ TableName: table, FilterExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }),
    );
    expect(Items).toEqual([{ pk, sk: 'scan', n: 7, payload: { ...payload, gone: undefined } }]);
  });

  test('each kind of command resolves its middleware once, not per call', async () => {
    const pk = uniqueName();
    for (let i = 0; i < 3; i++) await documents.send(new PutCommand({ TableName: table, Item: item(pk, `m${i}`) }));
    const handlers = (cached as unknown as { handlers?: WeakMap<object, unknown> }).handlers;
    const { PutItemCommand } = await import('@aws-sdk/client-dynamodb');
    expect(handlers?.has(PutItemCommand)).toBe(true);
  });
});
