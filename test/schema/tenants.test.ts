/** Two tenants on one table: B can do nothing to A's runs or units, even knowing their ids. */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';

const ACME = 'acme-key-0123456789abcdef';
const GLOBEX = 'globex-key-0123456789abcdef';

let api: TestServer;
let acmeWs: Client;
let globexWs: Client;
const runId = uniqueName('run');
const unitId = uniqueName('unit');
let acmeToken: number;

beforeAll(async () => {
  api = await startTestServer({ env: { RUNPLANE_API_KEYS: `${ACME}=acme,${GLOBEX}=globex` } });
  acmeWs = wsClient(api.url, { connectionParams: { authorization: `Bearer ${ACME}` } });
  globexWs = wsClient(api.url, { connectionParams: { authorization: `Bearer ${GLOBEX}` } });
  const as = { key: ACME };
  await api.gql(`mutation { createRun(input: { id: "${runId}", task: "acme's", budgetCap: 100 }) { __typename } }`, {}, as);
  await api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "secret", payload: { ssn: "x" } }) { __typename } }`, {}, as);
  const lease = await api.gql(
    `mutation { acquireLease(input: { unitId: "${unitId}", owner: "acme-worker", ttlSeconds: 600 }) { ... on Lease { token } } }`,
    {},
    as,
  );
  acmeToken = lease.data.acquireLease.token;
});
afterAll(async () => {
  await acmeWs.dispose();
  await globexWs.dispose();
});

const asGlobex = { key: GLOBEX };

describe("tenant B and tenant A's run", () => {
  test('cannot read it', async () => {
    expect((await api.gql(`{ run(id: "${runId}", consistent: true) { id } }`, {}, asGlobex)).data.run).toBeNull();
    expect((await api.gql(`{ run(id: "${runId}") { task } }`, {}, { key: ACME })).data.run).toEqual({ task: "acme's" });
  });

  test('cannot list it', async () => {
    const ids = async (key: string) =>
      (await api.gql(`{ runs(first: 500) { edges { node { id } } } }`, {}, { key })).data.runs.edges.map(
        (e: { node: { id: string } }) => e.node.id,
      );
    expect(await ids(GLOBEX)).not.toContain(runId);
    expect(await ids(ACME)).toContain(runId);
  });

  test('cannot append to, charge or transition it: to B it does not exist', async () => {
    const append = await api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "x" }) { __typename } }`, {}, asGlobex);
    const charge = await api.gql(`mutation { chargeBudget(input: { runId: "${runId}", amount: 1 }) { __typename } }`, {}, asGlobex);
    const transition = await api.gql(
      `mutation { transitionRun(input: { runId: "${runId}", from: RUNNING, to: CANCELLED }) { __typename } }`,
      {},
      asGlobex,
    );
    expect([append.data.appendEvent, charge.data.chargeBudget, transition.data.transitionRun].map((r) => r.__typename)).toEqual([
      'RunNotFound',
      'RunNotFound',
      'RunNotFound',
    ]);
    const acmeView = await api.gql(`{ run(id: "${runId}", consistent: true) { status lastSeq budget { spent } } }`, {}, { key: ACME });
    expect(acmeView.data.run).toEqual({ status: 'RUNNING', lastSeq: 1, budget: { spent: 0 } });
  });

  test('cannot subscribe to it, over WebSocket or SSE', async () => {
    const query = `subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq type } }`;
    await expect(subscribeWs(globexWs, query, { runId }, 'runEvents').until(1)).rejects.toThrow(/does not exist/);
    await expect(subscribeSse(api.url, query, { runId }, 'runEvents', asGlobex).until(1)).rejects.toThrow(/does not exist/);
    const changed = `subscription($runId: ID!) { runChanged(runId: $runId) { id } }`;
    await expect(subscribeWs(globexWs, changed, { runId }, 'runChanged').until(1)).rejects.toThrow(/does not exist/);
  });
});

describe("tenant B and tenant A's unit", () => {
  test("cannot see or steal A's lease: B's unit of the same id is B's own", async () => {
    expect((await api.gql(`{ lease(unitId: "${unitId}") { owner } }`, {}, asGlobex)).data.lease).toBeNull();
    const taken = await api.gql(
      `mutation { acquireLease(input: { unitId: "${unitId}", owner: "globex-worker", ttlSeconds: 60 }) { __typename ... on Lease { owner } } }`,
      {},
      asGlobex,
    );
    expect(taken.data.acquireLease).toEqual({ __typename: 'Lease', owner: 'globex-worker' });
    const released = await api.gql(
      `mutation { releaseLease(input: { unitId: "${unitId}", owner: "acme-worker", token: ${acmeToken} }) { __typename } }`,
      {},
      asGlobex,
    );
    expect(released.data.releaseLease.__typename).toBe('LeaseLost');
    expect((await api.gql(`{ lease(unitId: "${unitId}") { owner token } }`, {}, { key: ACME })).data.lease).toEqual({
      owner: 'acme-worker',
      token: acmeToken,
    });
  });

  test("B's subscription to the unit sees only B's lease changes", async () => {
    const sub = subscribeWs<{ owner: string }>(
      globexWs,
      `subscription($u: ID!) { leaseChanged(unitId: $u) { owner } }`,
      { u: unitId },
      'leaseChanged',
    );
    await sub.until(1);
    await api.gql(
      `mutation { acquireLease(input: { unitId: "${unitId}", owner: "acme-worker", ttlSeconds: 600 }) { __typename } }`,
      {},
      { key: ACME },
    );
    await api.server.live.poller.caughtUp();
    expect(sub.items.map((l) => l.owner)).toEqual(['globex-worker']);
    sub.stop();
  });
});

test("every row in the table starts with its tenant's prefix", async () => {
  await api.gql(
    `mutation { appendEvent(input: { runId: "${runId}", type: "more", idempotencyKey: "k-${runId}" }) { __typename } }`,
    {},
    { key: ACME },
  );
  const { Items = [] } = await api.server.clients.doc.send(new ScanCommand({ TableName: api.table }));
  expect(Items.length).toBeGreaterThan(5);
  // Runplane's own rows (the stall watcher's lease) are under `_sys`, which no tenant id can be.
  for (const item of Items.filter((row) => !String(row.pk).startsWith('_sys#')))
    expect(String(item.pk)).toMatch(/^(acme|globex)#(run|unit|idem)#[^#]+$/);
  expect(Items.some((item) => String(item.pk).startsWith('globex#'))).toBe(true);
});
