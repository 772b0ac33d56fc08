import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { newRun, runPartition } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const CREATE = `mutation($input: CreateRunInput!) {
  createRun(input: $input) {
    __typename
    ... on Run { id task createdAt budget { cap spent } }
    ... on IdempotencyConflict { key operation message }
    ... on RunAlreadyExists { runId }
  }
}`;
const APPEND = `mutation($input: AppendEventInput!) {
  appendEvent(input: $input) {
    __typename
    ... on Event { seq type payload createdAt }
    ... on IdempotencyConflict { key operation }
    ... on BudgetExceeded { remaining }
  }
}`;
const CHARGE = `mutation($input: ChargeBudgetInput!) {
  chargeBudget(input: $input) {
    __typename
    ... on Budget { cap spent remaining version }
    ... on IdempotencyConflict { key operation }
    ... on BudgetExceeded { remaining }
  }
}`;

const rows = async (runId: string) =>
  (
    await api.server.clients.doc.send(
      new QueryCommand({
        TableName: api.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': runPartition(runId) },
        ConsistentRead: true,
      }),
    )
  ).Items ?? [];
const events = async (runId: string) => (await rows(runId)).filter((row) => String(row.sk).startsWith('evt#'));
const budget = async (runId: string) => (await rows(runId)).find((row) => row.sk === '#budget');
const fiveAtOnce = <T>(request: () => Promise<T>) => Promise.all(Array.from({ length: 5 }, request));

describe('5 concurrent retries with one idempotency key apply exactly one effect and all return the same result', () => {
  test('appendEvent', async () => {
    const runId = await newRun(api);
    const key = uniqueName('key');
    const results = await fiveAtOnce(
      async () =>
        (await api.gql(APPEND, { input: { runId, type: 'tool.called', payload: { n: 1 }, idempotencyKey: key } })).data.appendEvent,
    );
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(results[0]).toMatchObject({ __typename: 'Event', seq: 1, type: 'tool.called' });
    expect(await events(runId)).toHaveLength(1);
    // A later retry, too.
    const later = (await api.gql(APPEND, { input: { runId, type: 'tool.called', payload: { n: 1 }, idempotencyKey: key } })).data
      .appendEvent;
    expect(later).toEqual(results[0]);
    expect(await events(runId)).toHaveLength(1);
  });

  test('appendEvent with a cost: one event, one charge', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const key = uniqueName('key');
    const results = await fiveAtOnce(
      async () => (await api.gql(APPEND, { input: { runId, type: 'paid', cost: 30, idempotencyKey: key } })).data.appendEvent,
    );
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await events(runId)).toHaveLength(1);
    expect(await budget(runId)).toMatchObject({ spent: 30, remaining: 70 });
  });

  test('chargeBudget', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const key = uniqueName('key');
    const results = await fiveAtOnce(
      async () => (await api.gql(CHARGE, { input: { runId, amount: 40, idempotencyKey: key } })).data.chargeBudget,
    );
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(results[0]).toEqual({ __typename: 'Budget', cap: 100, spent: 40, remaining: 60, version: 2 });
    expect(await budget(runId)).toMatchObject({ spent: 40, remaining: 60 });
  });

  test('createRun (with and without an id given)', async () => {
    for (const id of [uniqueName('run'), undefined]) {
      const key = uniqueName('key');
      const results = await fiveAtOnce(
        async () => (await api.gql(CREATE, { input: { id, task: 'once', budgetCap: 5, idempotencyKey: key } })).data.createRun,
      );
      expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
      expect(results[0]).toMatchObject({ __typename: 'Run', task: 'once', budget: { cap: 5, spent: 0 } });
      if (id) expect(results[0].id).toBe(id);
      expect(await rows(results[0].id)).toHaveLength(2);
    }
  });

  test('transitionRun, acquireLease, renewLease and releaseLease return their first result again', async () => {
    const runId = await newRun(api);
    const transition = async (key: string) =>
      (
        await api.gql(
          `mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename ... on Run { status version } } }`,
          {
            input: { runId, from: 'RUNNING', to: 'WAITING_FOR_TOOL', idempotencyKey: key },
          },
        )
      ).data.transitionRun;
    const tKey = uniqueName('key');
    const [t1, t2] = [await transition(tKey), await transition(tKey)];
    expect(t1).toEqual({ __typename: 'Run', status: 'WAITING_FOR_TOOL', version: 2 });
    expect(t2).toEqual(t1);

    const unitId = uniqueName('unit');
    const lease = async (mutation: string, input: Record<string, unknown>) =>
      (
        await api.gql(
          `mutation($input: ${mutation[0]?.toUpperCase()}${mutation.slice(1)}Input!) { ${mutation}(input: $input) { __typename ... on Lease { owner token version expiresAt } } }`,
          { input },
        )
      ).data[mutation];
    const aKey = uniqueName('key');
    const acquired = await Promise.all(
      [1, 2, 3].map(() => lease('acquireLease', { unitId, owner: 'w', ttlSeconds: 60, idempotencyKey: aKey })),
    );
    expect(new Set(acquired.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(acquired[0].version).toBe(1);
    const rKey = uniqueName('key');
    const renewed = [await lease('renewLease', { unitId, owner: 'w', token: acquired[0].token, ttlSeconds: 90, idempotencyKey: rKey })];
    renewed.push(await lease('renewLease', { unitId, owner: 'w', token: acquired[0].token, ttlSeconds: 90, idempotencyKey: rKey }));
    expect(renewed[1]).toEqual(renewed[0]);
    expect(renewed[0].version).toBe(2);
    const lKey = uniqueName('key');
    const released = [await lease('releaseLease', { unitId, owner: 'w', token: acquired[0].token, idempotencyKey: lKey })];
    released.push(await lease('releaseLease', { unitId, owner: 'w', token: acquired[0].token, idempotencyKey: lKey }));
    expect(released[1]).toEqual(released[0]);
    expect(released[0].version).toBe(3);
  });
});

describe('the same key with a different request', () => {
  test('is refused with IdempotencyConflict and changes nothing', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const key = uniqueName('key');
    await api.gql(APPEND, { input: { runId, type: 'first', idempotencyKey: key } });
    const refused = (await api.gql(APPEND, { input: { runId, type: 'first', payload: { changed: true }, idempotencyKey: key } })).data
      .appendEvent;
    expect(refused).toEqual({ __typename: 'IdempotencyConflict', key, operation: 'appendEvent' });
    // Another operation with the key is a different request too.
    const charged = (await api.gql(CHARGE, { input: { runId, amount: 1, idempotencyKey: key } })).data.chargeBudget;
    expect(charged).toEqual({ __typename: 'IdempotencyConflict', key, operation: 'appendEvent' });
    expect((await events(runId)).map((row) => row.type)).toEqual(['first']);
    expect(await budget(runId)).toMatchObject({ spent: 0 });
  });

  test('a field sent as null and the same field left out are the same request; null inside a payload is not nothing', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const key = uniqueName('key');
    const first = (await api.gql(APPEND, { input: { runId, type: 't', payload: null, idempotencyKey: key } })).data.appendEvent;
    const again = (await api.gql(APPEND, { input: { runId, type: 't', idempotencyKey: key } })).data.appendEvent;
    expect(again).toEqual(first);
    const other = uniqueName('key');
    await api.gql(APPEND, { input: { runId, type: 't', payload: { a: null }, idempotencyKey: other } });
    const changed = (await api.gql(APPEND, { input: { runId, type: 't', payload: {}, idempotencyKey: other } })).data.appendEvent;
    expect(changed).toMatchObject({ __typename: 'IdempotencyConflict' });
    expect((await events(runId)).map((row) => row.type)).toEqual(['t', 't']);
  });

  test('a refused first request leaves the key free: its retry is judged again', async () => {
    const runId = await newRun(api, { budgetCap: 10 });
    const key = uniqueName('key');
    expect((await api.gql(CHARGE, { input: { runId, amount: 11, idempotencyKey: key } })).data.chargeBudget.__typename).toBe(
      'BudgetExceeded',
    );
    const record = await api.server.clients.doc.send(
      new GetCommand({ TableName: api.table, Key: { pk: `default#idem#${key}`, sk: 'idem' } }),
    );
    expect(record.Item).toBeUndefined();
  });

  test('a malformed key is refused naming it', async () => {
    const runId = await newRun(api);
    const response = await api.gql(APPEND, { input: { runId, type: 'x', idempotencyKey: 'has#hash' } });
    expect(response.errors?.[0]?.message).toContain('input.idempotencyKey');
    expect(await events(runId)).toEqual([]);
  });
});

test('an expired idempotency record not yet deleted by TTL counts as absent', async () => {
  const runId = await newRun(api);
  const key = uniqueName('key');
  // As DynamoDB leaves it: expired an hour ago, still in the table.
  await api.server.clients.doc.send(
    new PutCommand({
      TableName: api.table,
      Item: {
        pk: `default#idem#${key}`,
        sk: 'idem',
        operation: 'appendEvent',
        requestHash: 'from-an-old-request',
        result: '{}',
        expiresAt: Math.floor(Date.now() / 1000) - 3600,
      },
    }),
  );
  const result = (await api.gql(APPEND, { input: { runId, type: 'fresh', idempotencyKey: key } })).data.appendEvent;
  expect(result).toMatchObject({ __typename: 'Event', seq: 1, type: 'fresh' });
  const record = await api.server.clients.doc.send(
    new GetCommand({ TableName: api.table, Key: { pk: `default#idem#${key}`, sk: 'idem' } }),
  );
  expect(record.Item?.expiresAt).toBeGreaterThan(Date.now() / 1000 + 3600);
});
