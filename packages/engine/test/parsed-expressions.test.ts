/**
 * Parsed expressions are kept and reused for the very same expressions, names and values, and
 * with other values of the same types (those values put in place of the kept ones): a kept
 * parse never judges a request by another's values, a refusal is kept as a refusal, a value
 * dynalite refuses is refused, an expression whose outcome reads its values' content
 * (BETWEEN, attribute_type) is parsed afresh, an UpdateExpression's tree (which dynalite writes
 * into as it applies it) is handed to each request as a copy of its own, and the kept set stops
 * at its bound.
 */
import { GetItemCommand, PutItemCommand, QueryCommand, TransactWriteItemsCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { keepingParses } from '../src/parsed-expressions.ts';
import { createTestTable, dynamoClient, uniqueName } from './support/aws.ts';

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

  test('a fence-like condition with a new number each time is judged on that number', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), token: { N: '7' }, until: { N: '1000' } } }));
    const check = (token: string, now: string) =>
      client
        .send(
          new PutItemCommand({
            TableName: table,
            Item: { ...key(pk), token: { N: '7' }, until: { N: '1000' } },
            ConditionExpression: '#token = :token AND #until > :now',
            ExpressionAttributeNames: { '#token': 'token', '#until': 'until' },
            ExpressionAttributeValues: { ':token': { N: token }, ':now': { N: now } },
          }),
        )
        .then(
          () => 'written',
          (err: Error) => err.name,
        );
    const outcomes = [];
    for (const [token, now] of [
      ['7', '10'],
      ['7', '999'],
      ['7', '1000'],
      ['8', '10'],
      ['7', '20'],
      ['7', '1e3'],
      ['7', '999.5'],
    ])
      outcomes.push(await check(token as string, now as string));
    expect(outcomes).toEqual([
      'written',
      'written',
      'ConditionalCheckFailedException',
      'ConditionalCheckFailedException',
      'written',
      'ConditionalCheckFailedException',
      'written',
    ]);
  });

  test('a value dynalite refuses is refused, though the same expression with a good value was parsed', async () => {
    const put = (v: Record<string, unknown>) =>
      client
        .send(
          new PutItemCommand({
            TableName: table,
            Item: key(uniqueName()),
            ConditionExpression: '#v <> :v',
            ExpressionAttributeNames: { '#v': 'v' },
            ExpressionAttributeValues: { ':v': v as never },
          }),
        )
        .then(
          () => 'written',
          (err: Error) => err.message,
        );
    expect(await put({ N: '1' })).toBe('written');
    expect(await put({ N: 'one' })).toMatch(/cannot be converted to a numeric value/);
    expect(await put({ NULL: false })).toMatch(/Null attribute value types must have the value of true/);
    expect(await put({ SS: [] })).toMatch(/may not be empty/);
  });

  test('values named in a way that spells another request`s names and types are refused, not judged by that request`s values', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { ...key(pk), n: { N: '1' } } }));
    const put = (values: Record<string, unknown>) =>
      client
        .send(
          new PutItemCommand({
            TableName: table,
            Item: { ...key(pk), n: { N: '1' } },
            ConditionExpression: '#n = :a OR #n = :b',
            ExpressionAttributeNames: { '#n': 'n' },
            ExpressionAttributeValues: values as never,
          }),
        )
        .then(
          () => 'written',
          (err: Error) => err.name,
        );
    expect(await put({ ':a': { N: '1' }, ':b': { N: '2' } })).toBe('written');
    expect(await put({ ':a=N,:b': { N: '5' } })).toBe('ValidationException');
    expect(await put({ '[":a","N"],[":b"': { N: '5' } })).toBe('ValidationException');
  });

  test('BETWEEN and attribute_type judge their values` content on every request', async () => {
    const pk = uniqueName();
    await client.send(new PutItemCommand({ TableName: table, Item: { pk: { S: pk }, sk: { S: 'b' } } }));
    const between = (low: string, high: string) =>
      client
        .send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :low AND :high',
            ExpressionAttributeValues: { ':pk': { S: pk }, ':low': { S: low }, ':high': { S: high } },
          }),
        )
        .then(
          (answer) => answer.Count,
          (err: Error) => err.message,
        );
    expect(await between('a', 'c')).toBe(1);
    expect(await between('c', 'a')).toMatch(/upper bound to be greater than or equal to lower bound/);
    expect(await between('c', 'd')).toBe(0);
    const typed = (type: string) =>
      client
        .send(
          new PutItemCommand({
            TableName: table,
            Item: key(uniqueName()),
            ConditionExpression: 'attribute_type(#v, :t) OR attribute_not_exists(#v)',
            ExpressionAttributeNames: { '#v': 'v' },
            ExpressionAttributeValues: { ':t': { S: type } },
          }),
        )
        .then(
          () => 'written',
          (err: Error) => err.message,
        );
    expect(await typed('S')).toBe('written');
    expect(await typed('STRING')).toMatch(/Invalid attribute type name found; type: STRING/);
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

  test('one update text applied again and again: each with its own values, on the item as it then is', async () => {
    const pk = uniqueName();
    const update = (values: Record<string, unknown>) =>
      client.send(
        new UpdateItemCommand({
          TableName: table,
          Key: key(pk),
          UpdateExpression:
            'SET #n = if_not_exists(#n, :zero) + :by, #log = list_append(if_not_exists(#log, :empty), :entry), #last = :entry',
          ExpressionAttributeNames: { '#n': 'n', '#log': 'log', '#last': 'last' },
          ExpressionAttributeValues: { ':zero': { N: '0' }, ':empty': { L: [] }, ...values },
          ReturnValues: 'ALL_NEW',
        }),
      );
    for (let i = 1; i <= 4; i++) await update({ ':by': { N: String(i) }, ':entry': { L: [{ S: `step ${i}` }] } });
    // The very same request as the first, three times: applied to the item as it is each time.
    for (const n of ['11', '12', '13']) {
      const { Attributes } = await update({ ':by': { N: '1' }, ':entry': { L: [{ S: 'step 1' }] } });
      expect(Attributes?.n).toEqual({ N: n });
      expect(Attributes?.last).toEqual({ L: [{ S: 'step 1' }] });
    }
    const { Item } = await client.send(new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }));
    expect(Item?.log).toEqual({ L: ['step 1', 'step 2', 'step 3', 'step 4', 'step 1', 'step 1', 'step 1'].map((S) => ({ S })) });
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
    expect(parses).toBe(3);
    for (let i = 0; i < 2_500; i++) validate({ ConditionExpression: `#a = :v${i}` });
    expect(validate.size).toBeLessThanOrEqual(2_000);
    expect(validate.hits).toBe(2);
  });

  test('an update`s tree is a copy of its own for each request: writing into one changes no other', () => {
    let parses = 0;
    const validate = keepingParses((data) => {
      parses++;
      data._updates = { sections: [{ type: 'set', path: ['a'], val: (data.ExpressionAttributeValues as Record<string, unknown>)[':x'] }] };
      return undefined;
    });
    const request = (x: string) =>
      ({ UpdateExpression: 'SET a = :x', ExpressionAttributeValues: { ':x': { N: x } } }) as Record<string, unknown>;
    type Tree = { sections: { val: unknown }[] };
    const sectionOf = (data: Record<string, unknown>) => (data._updates as Tree).sections[0] as { val: unknown };
    const first = request('1');
    validate(first);
    // dynalite resolves each SET's value in place as it applies the update.
    sectionOf(first).val = { N: 'applied' };
    const same = request('1');
    validate(same);
    const other = request('2');
    validate(other);
    expect(parses).toBe(1);
    expect(sectionOf(same).val).toEqual({ N: '1' });
    expect(sectionOf(other).val).toEqual({ N: '2' });
    sectionOf(same).val = { N: 'applied too' };
    const third = request('1');
    validate(third);
    expect(sectionOf(third).val).toEqual({ N: '1' });
    expect(third._updates).not.toBe(same._updates);
  });

  test('a copy keeps what dynalite`s tree is made of: null-prototype maps, and map keys of any name', () => {
    const validate = keepingParses((data) => {
      // dynalite looks attribute names up in maps it makes without a prototype.
      const nestedPaths = Object.create(null) as Record<string, boolean>;
      nestedPaths.n = true;
      data._updates = {
        nestedPaths,
        sections: [{ type: 'set', path: ['m'], val: (data.ExpressionAttributeValues as Record<string, unknown>)[':m'] }],
      };
      return undefined;
    });
    // A value's map keys are attribute names: `__proto__` among them, an own key as JSON makes it.
    const request = (text: string) =>
      ({
        UpdateExpression: 'SET m = :m',
        ExpressionAttributeValues: JSON.parse(`{":m":{"M":{"__proto__":{"S":"${text}"},"constructor":{"S":"${text}"}}}}`),
      }) as Record<string, unknown>;
    validate(request('a'));
    for (const data of [request('a'), request('b')]) {
      validate(data);
      const tree = data._updates as { nestedPaths: Record<string, boolean>; sections: { val: { M: Record<string, unknown> } }[] };
      expect(Object.getPrototypeOf(tree.nestedPaths)).toBeNull();
      expect(tree.nestedPaths.constructor).toBeUndefined();
      const map = (tree.sections[0] as { val: { M: Record<string, unknown> } }).val.M;
      expect(Object.keys(map).sort()).toEqual(['__proto__', 'constructor']);
      expect(Object.getPrototypeOf(map)).toBe(Object.prototype);
    }
  });

  test('other values of the same types: the kept tree with the new values in place, the kept one untouched', () => {
    let parses = 0;
    const validate = keepingParses((data) => {
      parses++;
      const values = data.ExpressionAttributeValues as Record<string, unknown>;
      data._condition = {
        type: 'And',
        args: [
          { type: 'Equal', args: [['token'], values[':t']] },
          { type: 'GT', args: [['until'], values[':now']] },
        ],
      };
      return undefined;
    });
    const request = (t: string, now: string) =>
      ({
        ConditionExpression: '#token = :t AND #until > :now',
        ExpressionAttributeNames: { '#token': 'token', '#until': 'until' },
        ExpressionAttributeValues: { ':t': { N: t }, ':now': { N: now } },
      }) as Record<string, unknown>;
    const first = request('1', '100');
    validate(first);
    const second = request('1', '200');
    validate(second);
    expect(parses).toBe(1);
    expect(validate.reboundHits).toBe(1);
    expect(second._condition).toEqual({
      type: 'And',
      args: [
        { type: 'Equal', args: [['token'], { N: '1' }] },
        { type: 'GT', args: [['until'], { N: '200' }] },
      ],
    });
    expect((first._condition as { args: { args: unknown[] }[] }).args[1]?.args[1]).toEqual({ N: '100' });
    // Another type for a value, or another value name: parsed afresh.
    validate({ ...request('1', '300'), ExpressionAttributeValues: { ':t': { S: '1' }, ':now': { N: '300' } } });
    validate({ ...request('1', '300'), ExpressionAttributeValues: { ':t': { N: '1' }, ':later': { N: '300' } } });
    expect(parses).toBe(3);
  });

  test('a refusal is not reused for other values, and a value the check refuses is parsed afresh', () => {
    let parses = 0;
    const validate = keepingParses(
      (data) => {
        parses++;
        return (data.ExpressionAttributeValues as Record<string, { N: string }>)[':v']?.N === '0' ? 'refused' : undefined;
      },
      (value) => ((value as { N: string }).N === 'bad' ? 'a bad value' : undefined),
    );
    const request = (v: string) =>
      ({ ConditionExpression: '#a = :v', ExpressionAttributeValues: { ':v': { N: v } } }) as Record<string, unknown>;
    expect(validate(request('0'))).toBe('refused');
    expect(validate(request('1'))).toBeUndefined();
    expect(validate(request('2'))).toBeUndefined();
    expect(parses).toBe(2);
    validate(request('bad'));
    expect(parses).toBe(3);
  });
});

describe('a kept update on a table whose attribute names are also the names of Object members', () => {
  let named: string;
  beforeAll(async () => {
    // An index keyed on `constructor`: dynalite looks every key attribute up among the update's paths.
    ({ name: named } = await createTestTable(client, {
      attributes: [{ AttributeName: 'constructor', AttributeType: 'S' }],
      indexes: [
        { IndexName: 'byCtor', KeySchema: [{ AttributeName: 'constructor', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } },
      ],
    }));
  });
  const outcome = (sent: Promise<unknown>) =>
    sent.then(
      () => 'ok',
      (err: Error) => `${err.name}: ${err.message}`,
    );

  test('the same update again, and with other values, alone and in a transaction', async () => {
    const update = (n: string) =>
      outcome(
        client.send(
          new UpdateItemCommand({
            TableName: named,
            Key: key(uniqueName()),
            UpdateExpression: 'SET #n = :n, #k = :k',
            ExpressionAttributeNames: { '#n': 'n', '#k': 'constructor' },
            ExpressionAttributeValues: { ':n': { N: n }, ':k': { S: 'c' } },
          }),
        ),
      );
    // Parsed afresh, then the kept tree as it is, then with another value in place.
    expect([await update('1'), await update('1'), await update('2')]).toEqual(['ok', 'ok', 'ok']);
    const inTransaction = () =>
      outcome(
        client.send(
          new TransactWriteItemsCommand({
            TransactItems: [
              {
                Update: {
                  TableName: named,
                  Key: key(uniqueName()),
                  UpdateExpression: 'ADD #c :one SET #k = :k',
                  ExpressionAttributeNames: { '#c': 'count', '#k': 'constructor' },
                  ExpressionAttributeValues: { ':one': { N: '1' }, ':k': { S: 'c' } },
                },
              },
            ],
          }),
        ),
      );
    expect([await inTransaction(), await inTransaction()]).toEqual(['ok', 'ok']);
  });
});
