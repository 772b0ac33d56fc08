/**
 * Every mutation in the schema reaches the subscribers watching what it changed as it lands,
 * without the stream: this server's poller is set to read the stream once an hour, so only the
 * write's own publishing can bring the change. A mutation added to the schema without a case
 * here fails the first test.
 */
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { schema } from '../../src/schema/index.ts';
import { uniqueName } from '../support/aws.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { type Collected, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const HOUR_MS = 3_600_000;

let api: TestServer;
let ws: Client;
beforeAll(async () => {
  api = await startTestServer({ poll: { minIntervalMs: HOUR_MS, idleIntervalMs: HOUR_MS, maxBackoffMs: HOUR_MS } });
  ws = wsClient(api.url);
});
afterAll(async () => {
  await ws?.dispose();
});

interface RunState {
  id: string;
  status: string;
  version: number;
  budget: { spent: number; version: number };
  claim: { holder: string; token: number; version: number; expiresAt: string } | null;
}
interface LeaseState {
  owner: string | null;
  token: number;
  version: number;
  expiresAt: string | null;
}

const RUN_FIELDS = 'id status version budget { spent version } claim { holder token version expiresAt }';
const watchRun = (runId: string) =>
  subscribeWs<RunState>(ws, `subscription($runId: ID!) { runChanged(runId: $runId) { ${RUN_FIELDS} } }`, { runId }, 'runChanged');
const watchEvents = (runId: string) =>
  subscribeWs<{ seq: number; type: string }>(
    ws,
    'subscription($runId: ID!) { runEvents(runId: $runId) { seq type } }',
    { runId },
    'runEvents',
  );
const watchLease = (unitId: string) =>
  subscribeWs<LeaseState>(
    ws,
    'subscription($unitId: ID!) { leaseChanged(unitId: $unitId) { owner token version expiresAt } }',
    { unitId },
    'leaseChanged',
  );

/** Waits until the subscriber was handed something `matches` accepts (from its `from`th item on). */
async function sees<T>(collected: Collected<T>, what: string, matches: (item: T) => boolean, from = 0) {
  await waitFor(() => collected.errors.length > 0 || collected.items.slice(from).some(matches), { what: `a subscriber to see ${what}` });
  expect(collected.errors).toEqual([]);
}

/** Calls a mutation and returns its result (failing on a GraphQL error or an unexpected member). */
async function mutate(name: string, input: Record<string, unknown>, selection: string, typename: string) {
  const answer = await api.gql(
    `mutation($input: ${name[0]?.toUpperCase()}${name.slice(1)}Input!) { ${name}(input: $input) { __typename ${selection} } }`,
    {
      input,
    },
  );
  expect(answer.errors, JSON.stringify(answer.errors)).toBeUndefined();
  expect(answer.data?.[name]?.__typename, JSON.stringify(answer.data?.[name])).toBe(typename);
  return answer.data[name];
}

/** A run whose runChanged subscriber has its first state already. */
async function watchedRun() {
  const runId = await newRun(api);
  const run = watchRun(runId);
  await run.until(1);
  return { runId, run };
}

async function claimed(runId: string, key: Keyed) {
  const claim = await mutate('claimRun', key({ runId, holder: 'worker-1', ttlSeconds: 60 }), '... on RunClaim { token }', 'RunClaim');
  return claim.token as number;
}

type Keyed = (input: Record<string, unknown>) => Record<string, unknown>;

/** How each mutation is called, and what its subscriber must then be handed. */
const cases: Record<string, (key: Keyed) => Promise<void>> = {
  async createRun(key) {
    const runs = subscribeWs<{ id: string }>(ws, 'subscription { runsChanged { id } }', {}, 'runsChanged');
    // Subscribed once it is handed a change: a run created before it was listening does not count.
    await waitFor(
      async () => {
        await newRun(api);
        return runs.items.length > 0;
      },
      { what: 'runsChanged to be listening' },
    );
    const id = uniqueName('run');
    await mutate('createRun', key({ id, task: 't', budgetCap: 10 }), '', 'Run');
    await sees(runs, `run ${id}`, (run) => run.id === id);
    runs.stop();
  },
  async appendEvent(key) {
    const { runId, run } = await watchedRun();
    const events = watchEvents(runId);
    await waitFor(async () => (await api.gql('query { viewer { tenant } }')).data !== undefined, { what: 'the server' });
    // Subscribed live from now: the first append must arrive, and a costed one with its charge.
    const first = await mutate('appendEvent', key({ runId, type: 'step', payload: { n: 1 } }), '... on Event { seq }', 'Event');
    await sees(events, `seq ${first.seq}`, (event) => event.seq === first.seq);
    const costed = await mutate('appendEvent', key({ runId, type: 'tool', payload: null, cost: 3 }), '... on Event { seq }', 'Event');
    await sees(events, `seq ${costed.seq}`, (event) => event.seq === costed.seq);
    await sees(run, 'the charge of the costed append', (state) => state.budget.spent === 3);
    events.stop();
    run.stop();
  },
  async chargeBudget(key) {
    const { runId, run } = await watchedRun();
    await mutate('chargeBudget', key({ runId, amount: 4 }), '', 'Budget');
    await sees(run, 'the charge', (state) => state.budget.spent === 4);
    const token = await claimed(runId, key);
    await mutate('chargeBudget', key({ runId, amount: 1, fencingToken: token }), '', 'Budget');
    await sees(run, 'the fenced charge', (state) => state.budget.spent === 5);
    run.stop();
  },
  async transitionRun(key) {
    const { runId, run } = await watchedRun();
    await mutate('transitionRun', key({ runId, from: 'RUNNING', to: 'WAITING_FOR_TOOL' }), '', 'Run');
    await sees(run, 'WAITING_FOR_TOOL', (state) => state.status === 'WAITING_FOR_TOOL');
    // A finishing transition is a transaction (the budget's TTL and the claim's end with it).
    await mutate('transitionRun', key({ runId, from: 'WAITING_FOR_TOOL', to: 'FAILED' }), '', 'Run');
    await sees(run, 'FAILED', (state) => state.status === 'FAILED');
    run.stop();
  },
  async requestApproval(key) {
    const { runId, run } = await watchedRun();
    const events = watchEvents(runId);
    await mutate('requestApproval', key({ runId, request: { tool: 'deploy' } }), '', 'Run');
    await sees(run, 'AWAITING_APPROVAL', (state) => state.status === 'AWAITING_APPROVAL');
    await sees(events, 'approval.requested', (event) => event.type === 'approval.requested');
    events.stop();
    run.stop();
  },
  async resolveApproval(key) {
    const { runId, run } = await watchedRun();
    await mutate('requestApproval', key({ runId, request: { tool: 'deploy' } }), '', 'Run');
    const events = watchEvents(runId);
    await sees(run, 'AWAITING_APPROVAL', (state) => state.status === 'AWAITING_APPROVAL');
    await mutate('resolveApproval', key({ runId, approve: true }), '', 'Run');
    await sees(run, 'RUNNING again', (state) => state.status === 'RUNNING' && state.version > 2);
    await sees(events, 'approval.resolved', (event) => event.type === 'approval.resolved');
    events.stop();
    run.stop();
  },
  async claimRun(key) {
    const { runId, run } = await watchedRun();
    const token = await claimed(runId, key);
    await sees(run, 'the claim', (state) => state.claim?.holder === 'worker-1' && state.claim.token === token);
    run.stop();
  },
  async renewRunClaim(key) {
    const { runId, run } = await watchedRun();
    const token = await claimed(runId, key);
    await sees(run, 'the claim', (state) => state.claim?.token === token);
    const before = run.items.at(-1)?.claim?.version ?? 0;
    await mutate('renewRunClaim', { runId, holder: 'worker-1', token, ttlSeconds: 120 }, '', 'RunClaim');
    await sees(run, 'the renewed claim', (state) => (state.claim?.version ?? 0) > before);
    run.stop();
  },
  async releaseRunClaim(key) {
    const { runId, run } = await watchedRun();
    const token = await claimed(runId, key);
    await sees(run, 'the claim', (state) => state.claim?.token === token);
    const from = run.items.length;
    await mutate('releaseRunClaim', { runId, holder: 'worker-1', token }, '', 'RunClaim');
    // Released, nobody holds the run: its claim reads null.
    await sees(run, 'the released claim', (state) => state.claim === null, from);
    run.stop();
  },
  async cancelRun(key) {
    const { runId, run } = await watchedRun();
    const events = watchEvents(runId);
    await claimed(runId, key);
    await mutate('cancelRun', key({ runId, reason: 'no longer needed' }), '', 'Run');
    await sees(run, 'CANCELLED', (state) => state.status === 'CANCELLED');
    await sees(events, 'run.cancelled', (event) => event.type === 'run.cancelled');
    events.stop();
    run.stop();
  },
  async appendOutput() {
    // Output has no idempotency key: a retry is the same text at the same offset.
    const runId = await newRun(api);
    const output = subscribeWs<{ offset: number; text: string }>(
      ws,
      'subscription($runId: ID!) { runOutput(runId: $runId, stream: "llm") { offset text } }',
      { runId },
      'runOutput',
    );
    await mutate('appendOutput', { runId, stream: 'llm', offset: 0, text: 'first' }, '', 'OutputChunk');
    await sees(output, 'the text', (chunk) => chunk.text === 'first');
    await mutate('appendOutput', { runId, stream: 'llm', offset: 5, text: ' stored', durable: true }, '', 'OutputChunk');
    await sees(output, 'the durable text', (chunk) => chunk.offset === 5 && chunk.text === ' stored');
    output.stop();
  },
  async acquireLease(key) {
    const unitId = uniqueName('unit');
    const lease = watchLease(unitId);
    await mutate('acquireLease', key({ unitId, owner: 'worker-1', ttlSeconds: 60 }), '', 'Lease');
    await sees(lease, 'the lease', (state) => state.owner === 'worker-1');
    lease.stop();
  },
  async renewLease(key) {
    const unitId = uniqueName('unit');
    const lease = watchLease(unitId);
    const { token } = await mutate('acquireLease', key({ unitId, owner: 'worker-1', ttlSeconds: 60 }), '... on Lease { token }', 'Lease');
    await sees(lease, 'the lease', (state) => state.token === token);
    const before = lease.items.at(-1)?.version ?? 0;
    await mutate('renewLease', key({ unitId, owner: 'worker-1', token, ttlSeconds: 120 }), '', 'Lease');
    await sees(lease, 'the renewed lease', (state) => state.version > before);
    lease.stop();
  },
  async releaseLease(key) {
    const unitId = uniqueName('unit');
    const lease = watchLease(unitId);
    const { token } = await mutate('acquireLease', key({ unitId, owner: 'worker-1', ttlSeconds: 60 }), '... on Lease { token }', 'Lease');
    await sees(lease, 'the lease', (state) => state.token === token);
    const before = lease.items.at(-1)?.version ?? 0;
    await mutate('releaseLease', key({ unitId, owner: 'worker-1', token }), '', 'Lease');
    await sees(lease, 'the released lease', (state) => state.version > before);
    lease.stop();
  },
};

test('every mutation of the schema has a case here', () => {
  const mutations = Object.keys(schema.getMutationType()?.getFields() ?? {}).sort();
  expect(Object.keys(cases).sort()).toEqual(mutations);
});

describe.each([
  ['without an idempotency key', (input: Record<string, unknown>) => input],
  ['with an idempotency key', (input: Record<string, unknown>) => ({ ...input, idempotencyKey: uniqueName('key') })],
])('%s', (_, key) => {
  test.each(Object.keys(cases))('%s reaches its subscribers without the stream', async (name) => {
    await cases[name]?.(key);
  });
});
