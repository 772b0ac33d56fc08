/** The tenant-wide views: runsChanged, the leases listing and leasesChanged, each seeing one tenant only. */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { topics } from '../../src/streams/changes.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const ACME = 'acme-key-0123456789abcdef';
const GLOBEX = 'globex-key-0123456789abcdef';

let api: TestServer;
let acme: Client;
let globex: Client;
beforeAll(async () => {
  api = await startTestServer({ env: { RUNPLANE_API_KEYS: `${ACME}=acme,${GLOBEX}=globex` } });
  acme = wsClient(api.url, { connectionParams: { authorization: `Bearer ${ACME}` } });
  globex = wsClient(api.url, { connectionParams: { authorization: `Bearer ${GLOBEX}` } });
});
afterAll(async () => {
  await acme.dispose();
  await globex.dispose();
});

interface RunSeen {
  id: string;
  status: string;
  version: number;
  budget: { spent: number; version: number };
}
const RUNS_CHANGED = 'subscription($status: RunStatus) { runsChanged(status: $status) { id status version budget { spent version } } }';
const LEASES_CHANGED = 'subscription { leasesChanged { unitId owner token version expiresAt } }';
const asAcme = { key: ACME };

/** Waits until `count` subscribers listen on the tenant's topic, so that nothing written next is missed. */
async function listening(topic: string, count: number) {
  await waitFor(() => api.server.live.hub.listenersOf(topic) >= count, { what: `${count} listeners on ${topic}` });
}

describe('runsChanged', () => {
  test("a new run, its status and budget changes, and a run written straight into the table reach the tenant's subscribers, no one else's", async () => {
    const mine = subscribeWs<RunSeen>(acme, RUNS_CHANGED, {}, 'runsChanged');
    const theirs = subscribeWs<RunSeen>(globex, RUNS_CHANGED, {}, 'runsChanged');
    await listening(topics.runs('acme'), 1);
    await listening(topics.runs('globex'), 1);
    const runId = await newRun(api, { key: ACME });
    await mine.until(1);
    expect(mine.items[0]).toMatchObject({ id: runId, status: 'RUNNING', version: 1, budget: { spent: 0 } });
    await api.gql(`mutation { chargeBudget(input: { runId: "${runId}", amount: 7 }) { __typename } }`, {}, asAcme);
    await waitFor(() => mine.items.some((r) => r.id === runId && r.budget.spent === 7), { what: 'the charge' });
    await api.gql(`mutation { transitionRun(input: { runId: "${runId}", from: RUNNING, to: COMPLETED }) { __typename } }`, {}, asAcme);
    await waitFor(() => mine.items.some((r) => r.id === runId && r.status === 'COMPLETED'), { what: 'the transition' });

    // Another service writes a run's rows itself: the stream brings it.
    const direct = uniqueName('direct');
    const now = new Date().toISOString();
    const put = (Item: Record<string, unknown>) => api.server.clients.doc.send(new PutCommand({ TableName: api.table, Item }));
    await put({ ...keys.budget('acme', direct), runId: direct, cap: 10, spent: 0, version: 1 });
    await put({
      ...keys.run('acme', direct),
      ...keys.runListing('acme', direct, 'RUNNING', now),
      runId: direct,
      task: 'written directly',
      status: 'RUNNING',
      version: 1,
      createdAt: now,
      updatedAt: now,
    });
    await waitFor(() => mine.items.some((r) => r.id === direct), { what: 'the run written into the table' });

    // Each version once, in the order they happened, though the fast path and the stream both bring them.
    const versions = mine.items.filter((r) => r.id === runId).map((r) => `${r.version}.${r.budget.version}`);
    expect(new Set(versions).size, versions.join(' ')).toBe(versions.length);
    // globex's own run comes to globex alone.
    const theirRun = await newRun(api, { key: GLOBEX });
    await theirs.until(1);
    expect(theirs.items.map((r) => r.id)).toEqual([theirRun]);
    expect(mine.items.some((r) => r.id === theirRun)).toBe(false);
    mine.stop();
    theirs.stop();
  });

  test('status: only runs in that status after the change', async () => {
    const awaiting = subscribeWs<RunSeen>(acme, RUNS_CHANGED, { status: 'AWAITING_APPROVAL' }, 'runsChanged');
    await listening(topics.runs('acme'), 1);
    const quiet = await newRun(api, { key: ACME });
    const asked = await newRun(api, { key: ACME });
    await api.gql(`mutation { requestApproval(input: { runId: "${asked}", request: "ok?" }) { __typename } }`, {}, asAcme);
    await awaiting.until(1);
    expect(awaiting.items.map((r) => [r.id, r.status])).toEqual([[asked, 'AWAITING_APPROVAL']]);
    expect(awaiting.items.some((r) => r.id === quiet)).toBe(false);
    awaiting.stop();
  });

  test('over SSE too', async () => {
    const sse = subscribeSse<RunSeen>(api.url, RUNS_CHANGED, {}, 'runsChanged', { key: ACME });
    await listening(topics.runs('acme'), 1);
    const runId = await newRun(api, { key: ACME });
    await waitFor(() => sse.items.some((r) => r.id === runId) || sse.errors.length > 0, { what: 'the run over SSE' });
    expect(sse.errors).toEqual([]);
    sse.stop();
  });
});

const LEASES = `query($first: Int, $after: String, $held: Boolean) {
  leases(first: $first, after: $after, held: $held) { edges { node { unitId owner token } } pageInfo { hasNextPage endCursor } }
}`;

async function listAll(key: string, held?: boolean) {
  const units: string[] = [];
  let after: string | undefined;
  for (let page = 0; page < 50; page++) {
    const answer = await api.gql(LEASES, { first: 2, after, held }, { key });
    const { edges, pageInfo } = answer.data.leases;
    units.push(...edges.map((e: { node: { unitId: string } }) => e.node.unitId));
    if (!pageInfo.hasNextPage) return units;
    after = pageInfo.endCursor;
  }
  throw new Error('the listing did not end');
}

describe('leases and leasesChanged', () => {
  test('the listing pages through every unit of the tenant once, by id; held filters live from released; leasesChanged follows each change', async () => {
    const changes = subscribeWs<{ unitId: string; owner: string; version: number }>(acme, LEASES_CHANGED, {}, 'leasesChanged');
    const theirChanges = subscribeWs<{ unitId: string }>(globex, LEASES_CHANGED, {}, 'leasesChanged');
    await listening(topics.leases('acme'), 1);
    await listening(topics.leases('globex'), 1);
    const prefix = uniqueName('u');
    const units = Array.from({ length: 7 }, (_, i) => `${prefix}-${i}`);
    const tokens = new Map<string, number>();
    for (const unitId of units) {
      const answer = await api.gql(
        `mutation { acquireLease(input: { unitId: "${unitId}", owner: "w1", ttlSeconds: 600 }) { ... on Lease { token } } }`,
        {},
        asAcme,
      );
      tokens.set(unitId, answer.data.acquireLease.token);
    }
    const released = units[3] as string;
    await api.gql(
      `mutation { releaseLease(input: { unitId: "${released}", owner: "w1", token: ${tokens.get(released)} }) { __typename } }`,
      {},
      asAcme,
    );
    await api.gql(
      `mutation { acquireLease(input: { unitId: "${uniqueName('g')}", owner: "g", ttlSeconds: 60 }) { __typename } }`,
      {},
      {
        key: GLOBEX,
      },
    );

    await waitFor(async () => (await listAll(ACME)).filter((u) => u.startsWith(prefix)).length === 7, { what: 'the index to catch up' });
    const all = (await listAll(ACME)).filter((u) => u.startsWith(prefix));
    expect(all).toEqual([...units].sort());
    expect((await listAll(ACME, true)).filter((u) => u.startsWith(prefix))).toEqual(units.filter((u) => u !== released).sort());
    expect((await listAll(ACME, false)).filter((u) => u.startsWith(prefix))).toEqual([released]);
    expect((await listAll(ACME)).some((u) => u.startsWith('g-'))).toBe(false);

    await waitFor(() => changes.items.some((l) => l.unitId === released && l.version === 2), { what: 'the release' });
    for (const unitId of units) expect(changes.items.some((l) => l.unitId === unitId && l.owner === 'w1')).toBe(true);
    await theirChanges.until(1);
    expect(theirChanges.items.every((l) => !l.unitId.startsWith(prefix))).toBe(true);
    changes.stop();
    theirChanges.stop();
  });

  test('a cursor the listing did not hand out, and a page too large, are refused naming the argument', async () => {
    const bad = await api.gql(LEASES, { after: 'bm90IGEgY3Vyc29y' }, asAcme);
    expect(bad.errors?.[0]?.message).toMatch(/after/);
    const large = await api.gql(LEASES, { first: 100_000 }, asAcme);
    expect(large.errors?.[0]?.message).toMatch(/first: must be from 0 to/);
  });
});
