import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { newRun, putEventRow } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
let ws: Client;
beforeAll(async () => {
  api = await startTestServer();
  ws = wsClient(api.url);
});
afterAll(() => ws.dispose());

const RUN_EVENTS = `subscription($runId: ID!, $afterSeq: Int, $types: [String!]) {
  runEvents(runId: $runId, afterSeq: $afterSeq, types: $types) { runId seq type payload }
}`;
const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`;

interface Ev {
  runId: string;
  seq: number;
  type: string;
  payload: unknown;
}

const append = async (runId: string, type = 'step', payload: unknown = null) =>
  (await api.gql(APPEND, { input: { runId, type, payload } })).data.appendEvent;
const seqs = (events: Ev[]) => events.map((e) => e.seq);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

const writeDirectly = (runId: string, seq: number, type: string) => putEventRow(api, runId, seq, { type });

describe('runEvents over graphql-ws', () => {
  test('subscribing live to a run this server knows costs one read (where its events end), not a read of the run too', async () => {
    const runId = await newRun(api);
    await append(runId);
    const before = api.requestInputs.length;
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId }, 'runEvents');
    // Live from now: the next append arrives, the one before does not.
    await waitFor(() => api.requestInputs.slice(before).some((r) => JSON.stringify(r.input).includes(runId)), {
      what: 'the subscribe`s read',
    });
    await append(runId);
    expect(seqs(await sub.until(1))).toEqual([2]);
    const own = api.requestInputs.slice(before).filter((r) => JSON.stringify(r.input).includes(runId));
    // The append's own put, and the subscribe's one Query of the end.
    expect(own.map((r) => r.name).sort()).toEqual(['PutItemCommand', 'QueryCommand']);
    sub.stop();
  });

  test('an event row written straight into the table with the SDK reaches a subscriber', async () => {
    const runId = await newRun(api);
    await append(runId);
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 1 }, 'runEvents');
    await append(runId);
    await sub.until(1);
    await writeDirectly(runId, 3, 'from.another.service');
    const got = await sub.until(2);
    expect(got.map((e) => [e.seq, e.type])).toEqual([
      [2, 'step'],
      [3, 'from.another.service'],
    ]);
    expect(got[1]?.payload).toEqual({ via: 'sdk' });
    sub.stop();
  });

  test('afterSeq: 0 while 100 concurrent appends land: 1..100 exactly once, in order', async () => {
    const runId = await newRun(api);
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
    // The appends race the subscription's replay of the table: the join must hold either way.
    await Promise.all(range(1, 100).map((i) => append(runId, 'step', { i })));
    const got = await sub.until(100, 20_000);
    // The stream's copies of all these events have been read too: none may show up again.
    await api.server.live.poller.caughtUp();
    expect(seqs(sub.items)).toEqual(range(1, 100));
    expect(got).toHaveLength(100);
    sub.stop();
  });

  test('a subscriber that disconnects and resumes with its last seq gets exactly what it missed, then live', async () => {
    const runId = await newRun(api);
    const first = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
    for (let i = 0; i < 3; i++) await append(runId);
    const seen = await first.until(3);
    first.stop();
    const last = seen.at(-1)?.seq as number;

    for (let i = 0; i < 5; i++) await append(runId, 'while.away');
    const again = wsClient(api.url);
    const resumed = subscribeWs<Ev>(again, RUN_EVENTS, { runId, afterSeq: last }, 'runEvents');
    await resumed.until(5);
    await append(runId, 'live');
    await append(runId, 'live');
    await resumed.until(7);
    await api.server.live.poller.caughtUp();
    expect(resumed.items.map((e) => [e.seq, e.type])).toEqual([
      ...range(4, 8).map((seq) => [seq, 'while.away']),
      [9, 'live'],
      [10, 'live'],
    ]);
    resumed.stop();
    await again.dispose();
  });

  test('types: only those types, still in seq order', async () => {
    const runId = await newRun(api);
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0, types: ['tool.called'] }, 'runEvents');
    for (const type of ['model.responded', 'tool.called', 'model.responded', 'tool.called']) await append(runId, type);
    const got = await sub.until(2);
    expect(got.map((e) => [e.seq, e.type])).toEqual([
      [2, 'tool.called'],
      [4, 'tool.called'],
    ]);
    sub.stop();
  });

  test('a run that does not exist ends the subscription with NOT_FOUND, over WebSocket and SSE alike', async () => {
    const runId = uniqueName('absent');
    for (const sub of [
      subscribeWs<Ev>(ws, RUN_EVENTS, { runId }, 'runEvents'),
      subscribeSse<Ev>(api.url, RUN_EVENTS, { runId }, 'runEvents'),
    ]) {
      await expect(sub.until(1)).rejects.toThrow(/does not exist/);
      expect(sub.errors[0]).toMatchObject({ message: `run ${runId} does not exist`, extensions: { code: 'NOT_FOUND', runId } });
    }
  });

  test('bad arguments are refused like over HTTP', async () => {
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId: 'a#b' }, 'runEvents');
    await expect(sub.until(1)).rejects.toThrow(/runId/);
    // Validated once, when subscribing (not again per event): still before anything is read.
    const runId = await newRun(api);
    const tooMany = subscribeWs<Ev>(
      ws,
      RUN_EVENTS,
      { runId, afterSeq: 0, types: Array.from({ length: 21 }, (_, i) => `t${i}`) },
      'runEvents',
    );
    await expect(tooMany.until(1)).rejects.toThrow(/types: at most 20 types/);
    expect(tooMany.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    const negative = subscribeSse<Ev>(api.url, RUN_EVENTS, { runId, afterSeq: -1 }, 'runEvents');
    await expect(negative.until(1)).rejects.toThrow(/afterSeq/);
  });

  test('a variable GraphQL itself refuses (wrong type, missing) is BAD_USER_INPUT too, over WebSocket and SSE', async () => {
    const runId = await newRun(api);
    const wrongType = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 'one' }, 'runEvents');
    await expect(wrongType.until(1)).rejects.toThrow(/\$afterSeq.*Int cannot represent/);
    expect(wrongType.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    const missing = subscribeSse<Ev>(api.url, RUN_EVENTS, {}, 'runEvents');
    await expect(missing.until(1)).rejects.toThrow(/\$runId.*was not provided/);
    expect(missing.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    // null through a variable with a default, into a non-null argument: refused at each event.
    const nullIf = subscribeWs<Ev>(
      ws,
      'subscription($runId: ID!, $b: Boolean = true) { runEvents(runId: $runId, afterSeq: 0) { seq type @include(if: $b) } }',
      { runId, b: null },
      'runEvents',
    );
    await api.gql(APPEND, { input: { runId, type: 'step' } });
    await waitFor(() => nullIf.errors.length > 0, { what: 'the event`s error' });
    expect(nullIf.errors[0]).toMatchObject({
      message: 'Argument "if" of non-null type "Boolean!" must not be null.',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    nullIf.stop();
  });

  test('a second replica on the same table: its appends reach this replica only through the stream', async () => {
    const replica = await startTestServer({ table: api.table });
    const runId = await newRun(api);
    const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
    for (let i = 0; i < 3; i++) await replica.gql(APPEND, { input: { runId, type: 'from.replica' } });
    expect(seqs(await sub.until(3))).toEqual([1, 2, 3]);
    sub.stop();
  });
});

describe('runEvents over SSE', () => {
  test('history then live, over one HTTP response', async () => {
    const runId = await newRun(api);
    await append(runId, 'before');
    const sub = subscribeSse<Ev>(api.url, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
    await sub.until(1);
    await append(runId, 'after');
    await writeDirectly(runId, 3, 'direct');
    const got = await sub.until(3);
    expect(got.map((e) => [e.seq, e.type])).toEqual([
      [1, 'before'],
      [2, 'after'],
      [3, 'direct'],
    ]);
    sub.stop();
  });
});

describe('runChanged and leaseChanged', () => {
  const RUN_CHANGED = `subscription($runId: ID!) { runChanged(runId: $runId) { id status version budget { spent version } } }`;
  interface RunState {
    id: string;
    status: string;
    version: number;
    budget: { spent: number; version: number };
  }

  test('the current state, then states after status and budget changes, only moving forward', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const sub = subscribeWs<RunState>(ws, RUN_CHANGED, { runId }, 'runChanged');
    const sse = subscribeSse<RunState>(api.url, RUN_CHANGED, { runId }, 'runChanged');
    for (const feed of [sub, sse])
      expect((await feed.until(1))[0]).toEqual({ id: runId, status: 'RUNNING', version: 1, budget: { spent: 0, version: 1 } });
    await api.gql(`mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }`, {
      input: { runId, from: 'RUNNING', to: 'WAITING_FOR_TOOL' },
    });
    await api.gql(`mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename } }`, { input: { runId, amount: 30 } });
    await api.gql(`mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename } }`, { input: { runId, amount: 20 } });
    for (const feed of [sub, sse]) {
      await waitFor(() => feed.items.at(-1)?.budget.version === 3, { what: 'the last charge to arrive' });
      // The stream's copies of the same changes have been read too: they must not show up again.
      await api.server.live.poller.caughtUp();
      const versions = feed.items.map((s) => [s.version, s.budget.version] as const);
      for (let i = 1; i < versions.length; i++) {
        const [run, budget] = versions[i] as readonly [number, number];
        const [prevRun, prevBudget] = versions[i - 1] as readonly [number, number];
        expect(run >= prevRun && budget >= prevBudget && (run > prevRun || budget > prevBudget)).toBe(true);
      }
      expect(feed.items.at(-1)).toEqual({ id: runId, status: 'WAITING_FOR_TOOL', version: 2, budget: { spent: 50, version: 3 } });
      feed.stop();
    }
  });

  test('lease changes arrive with growing versions and tokens', async () => {
    const unitId = uniqueName('unit');
    const acquire = `mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { __typename } }`;
    await api.gql(acquire, { input: { unitId, owner: 'a', ttlSeconds: 60 } });
    const sub = subscribeWs<{ owner: string; token: number; version: number }>(
      ws,
      `subscription($unitId: ID!) { leaseChanged(unitId: $unitId) { owner token version } }`,
      { unitId },
      'leaseChanged',
    );
    await sub.until(1);
    await api.gql(acquire, { input: { unitId, owner: 'a', ttlSeconds: 60 } });
    await sub.until(2);
    await api.server.live.poller.caughtUp();
    expect(sub.items.map((l) => [l.owner, l.version])).toEqual([
      ['a', 1],
      ['a', 2],
    ]);
    expect((sub.items[1]?.token as number) > (sub.items[0]?.token as number)).toBe(true);
    sub.stop();
  });
});
