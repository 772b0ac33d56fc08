/**
 * An operation answers the same however often it has run: whatever a server caches per
 * document (its parse, its validation, a plan of it) must never change the answer a client
 * gets from the one graphql-js gave it the first time.
 */
import { getIntrospectionQuery } from 'graphql';
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
const runId = 'repeated-run';

beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_MAX_RESPONSE_BYTES: String(64 * 1024) });
  await api.gql('mutation { createRun(input: { id: "repeated-run", task: "t", budgetCap: 10 }) { __typename } }');
  for (const payload of [{ text: 'one' }, null, { list: [1, 'two', { deep: true }], constructor: { name: 'Set' } }]) {
    await api.gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
      input: { runId, type: 'step', payload },
    });
  }
  // Two events of 40 KB: reading both passes the 64 KB response limit.
  for (let i = 0; i < 2; i++) {
    await api.gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
      input: { runId, type: 'big', payload: { pad: 'x'.repeat(40 * 1024) } },
    });
  }
  await api.gql('mutation { acquireLease(input: { unitId: "unit-a", owner: "worker-1", ttlSeconds: 300 }) { __typename } }');
});

const refusal = '__typename ... on Error { message } ... on RunNotFound { runId }';
const operations: [string, string, Record<string, unknown>][] = [
  [
    'a run with its budget and events',
    `query($id: ID!) { run(id: $id, consistent: true) { id task status version createdAt updatedAt lastSeq
      budget { id cap spent remaining version }
      events(first: 3) { edges { cursor node { id seq type payload createdAt late missingBefore { from to } } } pageInfo { hasNextPage endCursor } } } }`,
    { id: runId },
  ],
  ['a run that does not exist', 'query { run(id: "nope") { id } }', {}],
  [
    'fragments, aliases, directives',
    'query($on: Boolean!) { a: run(id: "repeated-run") { ...R b: id @include(if: $on) } } fragment R on Run { status }',
    { on: false },
  ],
  [
    'a lease and the leases',
    'query { lease(unitId: "unit-a") { id unitId owner token version } leases(first: 5) { edges { node { unitId owner } } } }',
    {},
  ],
  [
    'a response past its limit',
    'query { run(id: "repeated-run", consistent: true) { events(types: ["big"], first: 2) { edges { node { seq payload } } } } }',
    {},
  ],
  ['introspection', getIntrospectionQuery(), {}],
  ['appendEvent to a missing run', `mutation { appendEvent(input: { runId: "nope", type: "t" }) { ${refusal} } }`, {}],
  [
    'a charge past the cap',
    `mutation { chargeBudget(input: { runId: "repeated-run", amount: 11 }) { ${refusal} ... on BudgetExceeded { cap remaining } } }`,
    {},
  ],
  [
    'a lease held by another',
    `mutation { acquireLease(input: { unitId: "unit-a", owner: "worker-2", ttlSeconds: 5 }) { ${refusal} ... on LeaseHeld { owner } } }`,
    {},
  ],
  [
    'a transition from the wrong status',
    `mutation { transitionRun(input: { runId: "repeated-run", from: COMPLETED, to: RUNNING }) { ${refusal} } }`,
    {},
  ],
  [
    'a variable of the wrong type, deep inside the input',
    'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
    { input: { runId, type: 't', idempotencyKey: [] } },
  ],
  ['a required variable missing', 'mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename } }', {}],
  [
    'two mutations in one operation, in order',
    `mutation { a: chargeBudget(input: { runId: "nope", amount: 1 }) { ${refusal} } b: appendEvent(input: { runId: "nope", type: "t" }) { ${refusal} } }`,
    {},
  ],
];

describe('repeated operations', () => {
  test.each(operations)('%s: the same answer on the twelfth execution as on the first', async (_, query, variables) => {
    const answers = [];
    for (let i = 0; i < 12; i++) answers.push(await api.gql(query, variables));
    expect(answers[11]).toEqual(answers[0]);
    expect(answers[10]).toEqual(answers[0]);
    expect(answers[0]?.data ?? answers[0]?.errors).toBeTruthy();
  });

  test('the table was left as it was by the refusals', async () => {
    const { data } = await api.gql(
      'query { run(id: "repeated-run", consistent: true) { lastSeq budget { spent } } lease(unitId: "unit-a") { owner } }',
    );
    expect(data).toEqual({ run: { lastSeq: 5, budget: { spent: 0 } }, lease: { owner: 'worker-1' } });
  });
});
