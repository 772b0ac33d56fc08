import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { newRun, runPartition } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_MAX_PAYLOAD_BYTES: '2048' });
});

const APPEND = `mutation($input: AppendEventInput!) {
  appendEvent(input: $input) {
    __typename
    ... on Event { runId seq type payload createdAt }
    ... on SequenceConflict { message runId seq lastSeq }
    ... on RunNotFound { message runId }
    ... on BudgetExceeded { message runId cap spent remaining requested }
  }
}`;

const append = async (input: Record<string, unknown>) => (await api.gql(APPEND, { input })).data?.appendEvent;

/** Every row of the run's partition, read straight from the table. */
async function rows(runId: string) {
  const { Items = [] } = await api.server.clients.doc.send(
    new QueryCommand({
      TableName: api.table,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': runPartition(runId) },
      ConsistentRead: true,
    }),
  );
  return Items;
}
const eventRows = async (runId: string) => (await rows(runId)).filter((row) => String(row.sk).startsWith('evt#'));

describe('appendEvent', () => {
  test('appends at the next seq, keeping the payload', async () => {
    const runId = await newRun(api);
    const first = await append({ runId, type: 'run.created', payload: { model: 'x', n: 1.5, list: [1, 'a', null], nested: { ok: true } } });
    expect(first).toMatchObject({
      __typename: 'Event',
      runId,
      seq: 1,
      type: 'run.created',
      payload: { model: 'x', n: 1.5, list: [1, 'a', null], nested: { ok: true } },
    });
    expect(new Date(first.createdAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect((await append({ runId, type: 'model.responded' })).seq).toBe(2);
    const stored = await eventRows(runId);
    expect(stored.map((row) => row.sk)).toEqual(['evt#0000000001', 'evt#0000000002']);
  });

  test('32 concurrent appends to one run get seqs exactly 1..32', async () => {
    const runId = await newRun(api);
    const results = await Promise.all(Array.from({ length: 32 }, (_, i) => append({ runId, type: 'step', payload: { i } })));
    expect(results.map((r) => r.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
    const stored = await eventRows(runId);
    expect(stored).toHaveLength(32);
    // Each stored event is the one its writer was told about.
    for (const result of results) expect(stored[result.seq - 1]?.payload).toEqual(result.payload);
  });

  test('an explicit seq goes exactly there', async () => {
    const runId = await newRun(api);
    await append({ runId, type: 'a' });
    expect(await append({ runId, type: 'b', seq: 2 })).toMatchObject({ __typename: 'Event', seq: 2 });
  });

  test('an explicit seq that is taken is SequenceConflict carrying the last seq', async () => {
    const runId = await newRun(api);
    await append({ runId, type: 'a' });
    await append({ runId, type: 'b' });
    const conflict = await append({ runId, type: 'late', seq: 1 });
    expect(conflict).toMatchObject({ __typename: 'SequenceConflict', runId, seq: 1, lastSeq: 2 });
    expect((await eventRows(runId)).map((row) => row.type)).toEqual(['a', 'b']);
  });

  test('an explicit seq that would leave a gap is SequenceConflict, and nothing is written', async () => {
    const runId = await newRun(api);
    await append({ runId, type: 'a' });
    const conflict = await append({ runId, type: 'far', seq: 5 });
    expect(conflict).toMatchObject({ __typename: 'SequenceConflict', seq: 5, lastSeq: 1 });
    expect(conflict.message).toContain('gap');
    expect(await eventRows(runId)).toHaveLength(1);
  });

  test('two workers racing for one explicit seq: one wins, the other is told the last seq', async () => {
    const runId = await newRun(api);
    for (let i = 0; i < 4; i++) await append({ runId, type: 'x' });
    const [a, b] = await Promise.all([append({ runId, type: 'A', seq: 5 }), append({ runId, type: 'B', seq: 5 })]);
    const kinds = [a.__typename, b.__typename].sort();
    expect(kinds).toEqual(['Event', 'SequenceConflict']);
    expect([a, b].find((r) => r.__typename === 'SequenceConflict').lastSeq).toBe(5);
  });

  test('a missing run is RunNotFound and nothing is written', async () => {
    const runId = uniqueName('absent');
    expect(await append({ runId, type: 'x' })).toEqual({ __typename: 'RunNotFound', runId, message: `run ${runId} does not exist` });
    expect(await append({ runId, type: 'x', seq: 1 })).toMatchObject({ __typename: 'RunNotFound' });
    expect(await rows(runId)).toEqual([]);
  });

  test('with a cost: event and charge happen together', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    expect(await append({ runId, type: 'tool.called', cost: 60 })).toMatchObject({ __typename: 'Event', seq: 1 });
    const budget = (await rows(runId)).find((row) => row.sk === '#budget');
    expect(budget).toMatchObject({ cap: 100, spent: 60, remaining: 40 });
  });

  test('a cost the budget cannot cover leaves neither event nor charge', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    await append({ runId, type: 'first', cost: 70 });
    const refused = await append({ runId, type: 'too.expensive', cost: 31 });
    expect(refused).toMatchObject({ __typename: 'BudgetExceeded', runId, cap: 100, spent: 70, remaining: 30, requested: 31 });
    const stored = await rows(runId);
    expect(stored.filter((row) => String(row.sk).startsWith('evt#')).map((row) => row.type)).toEqual(['first']);
    expect(stored.find((row) => row.sk === '#budget')).toMatchObject({ spent: 70, remaining: 30 });
  });

  test.each([
    [{ type: 'has space' }, 'input.type'],
    [{ type: '' }, 'input.type'],
    [{ type: 'a#b' }, 'input.type'],
    [{ runId: 'a#b' }, 'input.runId'],
    [{ seq: 0 }, 'input.seq'],
    [{ seq: -3 }, 'input.seq'],
    [{ cost: -1 }, 'input.cost'],
    [{ payload: 'x'.repeat(3000) }, 'input.payload'],
    [{ payload: JSON.parse(`${'['.repeat(30)}${']'.repeat(30)}`) }, 'input.payload'],
  ])('bad input %# is refused naming %s, and nothing is written', async (bad, field) => {
    const runId = await newRun(api);
    const response = await api.gql(APPEND, { input: { runId, type: 'ok', ...bad } });
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(response.errors?.[0]?.message).toContain(field);
    expect(await eventRows(runId)).toEqual([]);
  });

  test('numbers DynamoDB cannot store (1e400 parses to Infinity, 5e-324, 1e200) are refused naming the payload', async () => {
    for (const n of [5e-324, 1e200]) {
      const refused = await api.gql(APPEND, { input: { runId: await newRun(api), type: 'x', payload: { n } } });
      expect(refused.errors?.[0]?.message).toMatch(/input.payload: must only hold numbers DynamoDB can store/);
    }
    const runId = await newRun(api);
    const response = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"query":"mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }","variables":{"input":{"runId":"${runId}","type":"x","payload":{"n":1e400}}}}`,
    });
    const body = (await response.json()) as { errors?: { message: string; extensions?: { code?: string } }[] };
    expect(body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(body.errors?.[0]?.message).toContain('input.payload');
    expect(await eventRows(runId)).toEqual([]);
  });

  test('a type filter reads wide pages: a type that never matches costs few requests', async () => {
    const runId = await newRun(api);
    for (let i = 0; i < 120; i++) await append({ runId, type: 'common' });
    const before = api.requestInputs.length;
    const { data } = await api.gql(`query($id: ID!) { run(id: $id) { events(first: 1, types: ["rare"]) { edges { cursor } } } }`, {
      id: runId,
    });
    expect(data.run.events.edges).toEqual([]);
    // This request's own reads of the run (the server's background work, a stream poll say, may run meanwhile).
    const own = api.requestInputs.slice(before).filter((r) => JSON.stringify(r.input).includes(runId));
    expect(own.length).toBeGreaterThan(0);
    expect(own.length).toBeLessThanOrEqual(2);
  });

  test('numbers beyond 2^53 in a payload read back as JSON would parse them', async () => {
    const runId = await newRun(api);
    await append({ runId, type: 'big', payload: { n: 1e20 } });
    const { data } = await api.gql(`query($id: ID!) { run(id: $id) { events { edges { node { payload } } } } }`, { id: runId });
    expect(data.run.events.edges[0].node.payload).toEqual({ n: 1e20 });
  });
});
