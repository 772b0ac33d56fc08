/** Approvals: a status change and its timeline event in one transaction, exactly once, one winner of a race. */
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { newRun, storedEventRows } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const ACME = 'acme-key-0123456789abcdef';
const GLOBEX = 'globex-key-0123456789abcdef';
const ACME_READ = 'acme-read-0123456789abcdef';
/** A named key of acme's approver, and an unnamed one (named after its digest). */
const CFO = 'acme-cfo-key-0123456789abcdef';
const AGENT = 'acme-agent-key-0123456789abcdef';
const AGENT_NAME = `key-${createHash('sha256').update(AGENT).digest('hex').slice(0, 8)}`;

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({
    env: { RUNPLANE_API_KEYS: `${ACME}=acme:write:ops,${GLOBEX}=globex,${ACME_READ}=acme:read,${CFO}=acme:write:cfo,${AGENT}=acme` },
  });
});

const RUN =
  '__typename ... on Run { status version } ... on StatusConflict { current currentVersion message } ... on RunNotFound { message }';
const REQUEST = `mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { ${RUN} } }`;
const RESOLVE = `mutation($input: ResolveApprovalInput!) { resolveApproval(input: $input) { ${RUN} } }`;
const as = { key: ACME };

const request = async (input: Record<string, unknown>, key = ACME) => (await api.gql(REQUEST, { input }, { key })).data?.requestApproval;
const resolve = async (input: Record<string, unknown>, key = ACME) => (await api.gql(RESOLVE, { input }, { key })).data?.resolveApproval;

/** The run's events as the table holds them. */
async function eventsOf(runId: string, tenant = 'acme') {
  return (await storedEventRows(api, runId, tenant)).map((item) => ({ seq: item.seq, type: item.type, payload: item.payload }));
}

async function awaiting() {
  const runId = await newRun(api, { key: ACME });
  await api.gql(
    'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
    {
      input: { runId, type: 'step', payload: 1 },
    },
    as,
  );
  expect(await request({ runId, request: { tool: 'wire', amount: 10 } })).toEqual({
    __typename: 'Run',
    status: 'AWAITING_APPROVAL',
    version: 2,
  });
  return runId;
}

describe('requestApproval', () => {
  test('moves a RUNNING run to AWAITING_APPROVAL and appends approval.requested at the next seq, together', async () => {
    const runId = await awaiting();
    expect(await eventsOf(runId)).toEqual([
      { seq: 1, type: 'step', payload: 1 },
      { seq: 2, type: 'approval.requested', payload: { request: { tool: 'wire', amount: 10 }, by: 'ops' } },
    ]);
  });

  test('a run not RUNNING is refused with StatusConflict and nothing is written', async () => {
    const runId = await awaiting();
    expect(await request({ runId, request: 'again' })).toMatchObject({ __typename: 'StatusConflict', current: 'AWAITING_APPROVAL' });
    expect((await eventsOf(runId)).length).toBe(2);
  });

  test('a stale expectedVersion is refused', async () => {
    const runId = await newRun(api, { key: ACME });
    expect(await request({ runId, request: 1, expectedVersion: 7 })).toMatchObject({ __typename: 'StatusConflict', currentVersion: 1 });
    expect(await eventsOf(runId)).toEqual([]);
  });

  test('bad input is a top-level error naming the field', async () => {
    const runId = await newRun(api, { key: ACME });
    const answer = await api.gql(REQUEST, { input: { runId: 'bad#id', request: 1 } }, as);
    expect(answer.errors?.[0]?.message).toMatch(/runId/);
    const big = await api.gql(REQUEST, { input: { runId, request: 'x'.repeat(70_000) } }, as);
    expect(big.errors?.[0]?.message).toMatch(/input\.request: is \d+ bytes, more than the limit/);
  });
});

describe('resolveApproval', () => {
  test('approved: back to RUNNING, approval.resolved records the deciding key`s name, the reason, and the caller`s own word apart', async () => {
    const runId = await awaiting();
    expect(await resolve({ runId, approve: true, by: 'the ceo', reason: 'fine' }, CFO)).toEqual({
      __typename: 'Run',
      status: 'RUNNING',
      version: 3,
    });
    expect((await eventsOf(runId)).at(-1)).toEqual({
      seq: 3,
      type: 'approval.resolved',
      payload: { approved: true, by: 'cfo', reason: 'fine', statedBy: 'the ceo' },
    });
  });

  test('rejected: the run ends FAILED; without `by` nothing is stated, and an unnamed key is named after its digest', async () => {
    const runId = await awaiting();
    expect(await resolve({ runId, approve: false }, AGENT)).toMatchObject({ status: 'FAILED' });
    expect((await eventsOf(runId)).at(-1)).toMatchObject({
      type: 'approval.resolved',
      payload: { approved: false, by: AGENT_NAME, reason: null, statedBy: null },
    });
  });

  test('an agent`s own key cannot approve as anybody else: `by` is never the recorded decider', async () => {
    const runId = await awaiting();
    await resolve({ runId, approve: true, by: 'cfo' }, AGENT);
    const [decision] = (await eventsOf(runId)).filter((e) => e.type === 'approval.resolved');
    expect(decision?.payload).toMatchObject({ by: AGENT_NAME, statedBy: 'cfo' });
  });

  test('two approvers racing: exactly one wins, the other gets StatusConflict, one approval.resolved event', async () => {
    for (let round = 0; round < 5; round++) {
      const runId = await awaiting();
      const answers = await Promise.all([resolve({ runId, approve: true, by: 'ana' }), resolve({ runId, approve: false, by: 'bo' })]);
      expect(answers.map((a) => a.__typename).sort()).toEqual(['Run', 'StatusConflict']);
      const resolved = (await eventsOf(runId)).filter((e) => e.type === 'approval.resolved');
      expect(resolved).toHaveLength(1);
      const winner = answers.find((a) => a.__typename === 'Run');
      expect(winner.status).toBe((resolved[0]?.payload as { approved?: boolean } | undefined)?.approved ? 'RUNNING' : 'FAILED');
    }
  });

  test('a retry with the same idempotency key gets the first result and writes nothing again', async () => {
    const runId = await awaiting();
    const input = { runId, approve: true, by: 'ana', idempotencyKey: uniqueName('idem') };
    const [first, second] = await Promise.all([resolve(input), resolve(input)]);
    expect(first).toEqual({ __typename: 'Run', status: 'RUNNING', version: 3 });
    expect(second).toEqual(first);
    expect(await resolve(input)).toEqual(first);
    expect((await eventsOf(runId)).filter((e) => e.type === 'approval.resolved')).toHaveLength(1);
    const other = await api.gql(RESOLVE, { input: { ...input, approve: false } }, as);
    expect(other.data.resolveApproval.__typename).toBe('IdempotencyConflict');
  });

  test('a RUNNING run has nothing to resolve: StatusConflict', async () => {
    const runId = await newRun(api, { key: ACME });
    expect(await resolve({ runId, approve: true, by: 'ana' })).toMatchObject({ __typename: 'StatusConflict', current: 'RUNNING' });
    expect(await eventsOf(runId)).toEqual([]);
  });

  test('another tenant cannot request or resolve a run it does not own, and a read-only key may not at all', async () => {
    const runId = await awaiting();
    expect(await resolve({ runId, approve: true, by: 'mallory' }, GLOBEX)).toMatchObject({ __typename: 'RunNotFound' });
    expect(await request({ runId, request: 1 }, GLOBEX)).toMatchObject({ __typename: 'RunNotFound' });
    const readOnly = await api.gql(RESOLVE, { input: { runId, approve: true, by: 'viewer' } }, { key: ACME_READ });
    expect(readOnly.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await eventsOf(runId)).filter((e) => e.type === 'approval.resolved')).toEqual([]);
    expect(await eventsOf(runId, 'globex')).toEqual([]);
  });
});

describe('nothing else can stand in for a decision', () => {
  test('transitionRun out of AWAITING_APPROVAL is refused, naming resolveApproval, and nothing changes', async () => {
    const runId = await awaiting();
    for (const to of ['RUNNING', 'FAILED', 'CANCELLED', 'COMPLETED']) {
      const answer = await api.gql(
        'mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }',
        { input: { runId, from: 'AWAITING_APPROVAL', to } },
        as,
      );
      expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      expect(answer.errors?.[0]?.message).toMatch(/AWAITING_APPROVAL is left only through resolveApproval/);
    }
    const { data } = await api.gql(`query { run(id: "${runId}", consistent: true) { status version } }`, {}, as);
    expect(data.run).toEqual({ status: 'AWAITING_APPROVAL', version: 2 });
    expect((await eventsOf(runId)).map((e) => e.type)).toEqual(['step', 'approval.requested']);
  });

  test.each([
    'approval.requested',
    'approval.resolved',
    'run.cancelled',
    'run.stalled',
    'run.reclaimed',
    'Approval.Resolved',
    'approval.resolved.',
    'RUN.CANCELLED',
    'run_stalled',
    'run-stalled',
    'run:stalled',
    'run..stalled',
    'runstalled',
    'Run/Reclaimed',
    'approval_requested',
    'approvaI.resolved',
    'run.cancelIed',
    'run.sta11ed',
    'appr0val.res0lved',
    'run.reclairned',
    'run.canceled',
  ])('appendEvent refuses the server`s own type %s, naming the rule, and writes nothing', async (type) => {
    const runId = await newRun(api, { key: ACME });
    const answer = await api.gql(
      'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
      { input: { runId, type, payload: { approved: true, by: 'cfo' } } },
      as,
    );
    expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(answer.errors?.[0]?.message).toMatch(/input\.type: is a type the server writes itself/);
    expect(await eventsOf(runId)).toEqual([]);
  });

  test('the agents` own types stay theirs: run.created, run.completed, approval.note, run.stalled.retry', async () => {
    const runId = await newRun(api, { key: ACME });
    for (const type of ['run.created', 'run.completed', 'approval.note', 'run.stalled.retry']) {
      const answer = await api.gql(
        'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
        { input: { runId, type } },
        as,
      );
      expect(answer.data.appendEvent.__typename).toBe('Event');
    }
    expect((await eventsOf(runId)).map((e) => e.type)).toEqual(['run.created', 'run.completed', 'approval.note', 'run.stalled.retry']);
  });
});

test('viewer tells a key its tenant, its name and whether it may write', async () => {
  expect((await api.gql('{ viewer { tenant name canWrite } }', {}, { key: ACME })).data.viewer).toEqual({
    tenant: 'acme',
    name: 'ops',
    canWrite: true,
  });
  expect((await api.gql('{ viewer { name } }', {}, { key: AGENT })).data.viewer.name).toBe(AGENT_NAME);
  expect((await api.gql('{ viewer { tenant canWrite } }', {}, { key: ACME_READ })).data.viewer).toEqual({
    tenant: 'acme',
    canWrite: false,
  });
  expect((await api.gql('{ viewer { tenant } }')).errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
});
