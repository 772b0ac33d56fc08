/**
 * Who wrote an event is the origin the server records (SERVER for its own steps, CLIENT for
 * anything else), read alike by queries, runEvents over WebSocket and SSE, live and from the
 * table: a client's type spelled like the server's is still the client's, and a row written
 * around the API is a client's whatever its type.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { parse } from 'graphql';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { planResults } from '../../src/http/subscriptions/plain-execution.ts';
import { schema } from '../../src/schema/index.ts';
import { keys } from '../../src/table/keys.ts';
import { newRun, OPEN_TENANT, putEventRow, storedEventRows } from '../support/runs.ts';
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

interface Seen {
  seq: number;
  type: string;
  origin: string;
}

const RUN_EVENTS = 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq type origin } }';
const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq type origin } } }';

const mutate = async (query: string, input: Record<string, unknown>) => {
  const { data, errors } = await api.gql(query, { input });
  expect(errors).toBeUndefined();
  return data;
};

/** What every reader must see: the look-alikes and the rows written around the API are the client's. */
const EXPECTED: Seen[] = [
  { seq: 1, type: 'approval.resolvecl', origin: 'CLIENT' },
  { seq: 2, type: 'run.5talled', origin: 'CLIENT' },
  { seq: 3, type: 'approval.requested', origin: 'SERVER' },
  { seq: 4, type: 'approval.resolved', origin: 'SERVER' },
  { seq: 5, type: 'approval.resolved', origin: 'CLIENT' },
  { seq: 6, type: 'run.stalled', origin: 'CLIENT' },
  { seq: 7, type: 'run.cancelled', origin: 'SERVER' },
];

test('look-alikes appended by a client read CLIENT, the server`s approval and cancel read SERVER, rows written around the API read CLIENT: over queries, WebSocket and SSE', async () => {
  const runId = await newRun(api);
  // Subscribed before the writes (what comes live, published as it lands or read from the stream) and after them (read from the table).
  const before = api.requestInputs.length;
  const early = [
    subscribeWs<Seen>(ws, RUN_EVENTS, { runId }, 'runEvents'),
    subscribeSse<Seen>(api.url, RUN_EVENTS, { runId }, 'runEvents'),
  ];
  const reads = () => api.requestInputs.slice(before).filter((r) => r.name === 'QueryCommand' && JSON.stringify(r.input).includes(runId));
  await waitFor(() => reads().length >= early.length, { what: 'both subscriptions reading where the run ends' });

  for (const type of ['approval.resolvecl', 'run.5talled']) {
    const { appendEvent } = await mutate(APPEND, { runId, type });
    expect(appendEvent).toMatchObject({ __typename: 'Event', type, origin: 'CLIENT' });
  }
  await mutate('mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { __typename } }', { runId, request: 'ok?' });
  await mutate('mutation($input: ResolveApprovalInput!) { resolveApproval(input: $input) { __typename } }', { runId, approve: true });
  // Straight into the table with the SDK: a server type without an origin, and one with an origin not the server's own value.
  await putEventRow(api, runId, 5, { type: 'approval.resolved' });
  await api.server.clients.doc.send(
    new PutCommand({
      TableName: api.table,
      Item: {
        ...keys.event(OPEN_TENANT, runId, 6),
        seq: 6,
        type: 'run.stalled',
        payload: null,
        origin: 'server',
        createdAt: new Date().toISOString(),
      },
    }),
  );
  const { cancelRun } = await mutate(
    'mutation($input: CancelRunInput!) { cancelRun(input: $input) { __typename ... on Run { status } } }',
    {
      runId,
    },
  );
  expect(cancelRun).toEqual({ __typename: 'Run', status: 'CANCELLED' });

  expect((await storedEventRows(api, runId)).map((row) => row.origin)).toEqual([
    'CLIENT',
    'CLIENT',
    'SERVER',
    'SERVER',
    undefined,
    'server',
    'SERVER',
  ]);

  // The first page read with the run, a page of its own (by cursor, newest first), and filtered by type.
  const { data } = await api.gql(
    `query($id: ID!) { run(id: $id, consistent: true) {
      first: events(first: 50) { edges { node { seq type origin } } }
      last: events(last: 50) { edges { node { seq type origin } } }
      typed: events(afterSeq: 0, types: ["approval.resolved", "approval.resolvecl"]) { edges { node { seq type origin } } }
    } }`,
    { id: runId },
  );
  const nodes = (page: { edges: { node: Seen }[] }) => page.edges.map((edge) => edge.node);
  expect(nodes(data.run.first)).toEqual(EXPECTED);
  expect(nodes(data.run.last)).toEqual(EXPECTED);
  expect(nodes(data.run.typed)).toEqual(EXPECTED.filter((event) => event.type.startsWith('approval.resolv')));

  const late = [subscribeWs<Seen>(ws, RUN_EVENTS, { runId }, 'runEvents'), subscribeSse<Seen>(api.url, RUN_EVENTS, { runId }, 'runEvents')];
  for (const sub of [...early, ...late]) {
    expect((await sub.until(EXPECTED.length)).slice(0, EXPECTED.length)).toEqual(EXPECTED);
    sub.stop();
  }
});

test('a client cannot set the origin: appendEvent has no such input, and nothing is written', async () => {
  const runId = await newRun(api);
  const { data, errors } = await api.gql(APPEND, { input: { runId, type: 'step', origin: 'SERVER' } });
  expect(data).toBeUndefined();
  expect(errors?.[0]?.message).toMatch(/Field "origin" is not defined by type "AppendEventInput"/);
  expect(await storedEventRows(api, runId)).toEqual([]);
});

test('a runEvents selection with origin has a plan (the fast path), which delivers what graphql-js would', () => {
  const plan = planResults({
    schema,
    document: parse('subscription { runEvents(runId: "r1") { seq origin o: origin } }'),
    contextValue: {},
  });
  expect(plan).toBeDefined();
  const event = { runId: 'r1', seq: 3, type: 'run.cancelled', payload: null, createdAt: new Date() };
  expect(plan?.({ ...event, origin: 'SERVER' })).toEqual({ data: { runEvents: { seq: 3, origin: 'SERVER', o: 'SERVER' } } });
  expect(plan?.({ ...event, origin: 'CLIENT' })).toEqual({ data: { runEvents: { seq: 3, origin: 'CLIENT', o: 'CLIENT' } } });
  // A value from before origins were recorded: the client's.
  expect(plan?.(event)).toEqual({ data: { runEvents: { seq: 3, origin: 'CLIENT', o: 'CLIENT' } } });
});
