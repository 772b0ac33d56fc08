/**
 * Group commit: concurrent appends to one run in one server are written together, with no
 * seq collisions among themselves; replicas on the same table still meet by conditional failure.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { InvalidInput } from '../../src/domain/errors.ts';
import { createStores } from '../../src/store/index.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { metric as metricOf } from '../support/metrics.ts';
import { newRun, storedEventRows } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`;

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

/** The seqs stored for the run, read straight from the table. */
async function storedSeqs(server: TestServer, runId: string) {
  return (await storedEventRows(server, runId)).map((item) => Number(String(item.sk).slice(4))).sort((a, b) => a - b);
}

/** A counter from GET /metrics. */
const metric = (server: TestServer, name: string) => metricOf(server.url, name);

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

async function appendConcurrently(server: TestServer, runId: string, n: number, tag = '') {
  const results = await Promise.all(range(n).map((i) => server.gql(APPEND, { input: { runId, type: 'step', payload: { i, tag } } })));
  for (const r of results) expect(r.data?.appendEvent.__typename, JSON.stringify(r)).toBe('Event');
  return results.map((r) => r.data?.appendEvent.seq as number);
}

describe('group commit', () => {
  test('64 concurrent appends to one run: seqs 1..64, written in batches, no collisions among them', async () => {
    const runId = await newRun(api);
    const before = {
      conflicts: await metric(api, 'runplane_event_append_conflicts_total'),
      batches: await metric(api, 'runplane_event_group_commits_total'),
    };
    const seqs = await appendConcurrently(api, runId, 64);
    expect([...seqs].sort((a, b) => a - b)).toEqual(range(64));
    expect(await storedSeqs(api, runId)).toEqual(range(64));
    expect(await metric(api, 'runplane_event_append_conflicts_total')).toBe(before.conflicts);
    expect(await metric(api, 'runplane_event_group_commits_total')).toBeGreaterThan(before.batches);
  });

  test('each append gets its own event back, in the order its batch wrote them', async () => {
    const runId = await newRun(api);
    const results = await Promise.all(
      range(20).map((i) =>
        api.gql(`mutation($input: AppendEventInput!) { appendEvent(input: $input) { ... on Event { seq payload } } }`, {
          input: { runId, type: 'step', payload: { i } },
        }),
      ),
    );
    const { data } = await api.gql(`query($id: ID!) { run(id: $id) { events(first: 50) { edges { node { seq payload } } } } }`, {
      id: runId,
    });
    const stored = new Map<number, unknown>(
      data.run.events.edges.map((e: { node: { seq: number; payload: unknown } }) => [e.node.seq, e.node.payload]),
    );
    for (const r of results) expect(stored.get(r.data.appendEvent.seq)).toEqual(r.data.appendEvent.payload);
    expect(stored.size).toBe(20);
  });

  test('switched off (RUNPLANE_GROUP_COMMIT=false), appends still get unique contiguous seqs, one transaction each', async () => {
    const off = await startTestServer({ RUNPLANE_GROUP_COMMIT: 'false' });
    const runId = await newRun(off);
    const seqs = await appendConcurrently(off, runId, 32);
    expect([...seqs].sort((a, b) => a - b)).toEqual(range(32));
    expect(await storedSeqs(off, runId)).toEqual(range(32));
    expect(await metric(off, 'runplane_event_group_commits_total')).toBe(0);
  });

  test('on the embedded in-memory engine too, crowds of plain and of fenced appends are written in batches', async () => {
    // Its reads answer without I/O: a transaction that never yielded to the event loop would be
    // written before the next append was even read, and every batch would hold one append.
    const embedded = await startTestServer({ env: { AWS_ENDPOINT_URL_DYNAMODB: undefined, RUNPLANE_IN_MEMORY: 'true' } as never });
    const runId = await newRun(embedded);
    const claimed = await embedded.gql('mutation($input: ClaimRunInput!) { claimRun(input: $input) { ... on RunClaim { token } } }', {
      input: { runId, holder: 'w', ttlSeconds: 600 },
    });
    const fencingToken = claimed.data.claimRun.token as number;
    const transactions = () => embedded.requests.filter((name) => name === 'TransactWriteItemsCommand').length;
    for (const fenced of [false, true]) {
      const before = transactions() + embedded.requests.filter((name) => name === 'PutCommand').length;
      const results = await Promise.all(
        range(48).map((i) => embedded.gql(APPEND, { input: { runId, type: 'step', payload: { i }, ...(fenced ? { fencingToken } : {}) } })),
      );
      for (const r of results) expect(r.data?.appendEvent.__typename, JSON.stringify(r)).toBe('Event');
      const writes = transactions() + embedded.requests.filter((name) => name === 'PutCommand').length - before;
      expect(writes, fenced ? 'fenced' : 'plain').toBeLessThan(24);
    }
    expect(await storedSeqs(embedded, runId)).toEqual(range(96));
  });

  test('two replicas on one table, each grouping its own writers: no seq twice, no append lost', async () => {
    const replica = await startTestServer({ table: api.table });
    const runId = await newRun(api);
    const [a, b] = await Promise.all([appendConcurrently(api, runId, 60, 'a'), appendConcurrently(replica, runId, 60, 'b')]);
    const all = [...a, ...b].sort((x, y) => x - y);
    expect(all).toEqual(range(120));
    expect(await storedSeqs(api, runId)).toEqual(range(120));
  });

  test('an append too large for one item fails alone; the others in its batch are written', async () => {
    const stores = createStores({
      doc: api.server.clients.doc,
      tableName: api.table,
      now: () => new Date(),
      retention: { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400 },
    });
    const runId = await newRun(api);
    const huge = 'x'.repeat(450 * 1024);
    const sent = api.requests.length;
    const outcomes = await Promise.allSettled(
      range(12).map((i) => stores.events.append({ tenant: 'default', runId, type: 'step', payload: i === 6 ? { huge } : { i } })),
    );
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect((failed[0] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidInput);
    expect(await storedSeqs(api, runId)).toEqual(range(11));
    // They were tried together first, then one by one.
    expect(api.requests.slice(sent)).toContain('TransactWriteItemsCommand');
    expect(stores.events.counters.appends).toBe(11);
  });
});

describe.skipIf(onlyEmbedded)('group commit when DynamoDB fails', () => {
  test('a batch whose outcome is unknown (a lost response) is not written again: no event stored twice', async () => {
    const { engine } = await ownEngine();
    try {
      const server = await startTestServer({ endpoint: engine.endpoint, stopAfterAll: false });
      try {
        const runId = await newRun(server);
        // Every attempt of a batch is applied (the first) or replayed (the SDK's resends), and answered 500.
        using _ = engine.faults.inject({ operations: ['TransactWriteItems'], error: 'InternalServerError', after: true, times: 3 });
        const results = await Promise.all(range(6).map((i) => server.gql(APPEND, { input: { runId, type: 'step', payload: { i } } })));
        const answered = results.filter((r) => r.data?.appendEvent?.__typename === 'Event');
        const unavailable = results.filter((r) => r.errors?.[0]?.extensions?.code === 'UNAVAILABLE');
        expect(answered.length + unavailable.length).toBe(6);
        expect(unavailable.length).toBeGreaterThan(0);
        const { Items = [] } = await server.server.clients.doc.send(
          new QueryCommand({
            TableName: server.table,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :evt)',
            ExpressionAttributeValues: { ':pk': `default#run#${runId}`, ':evt': 'evt#' },
            ConsistentRead: true,
          }),
        );
        const payloads = Items.map((item) => (item.payload as { i: number }).i);
        expect(new Set(payloads).size).toBe(payloads.length);
        expect(Items.map((item) => Number(String(item.sk).slice(4)))).toEqual(range(Items.length));
      } finally {
        await server.server.stop();
      }
    } finally {
      await engine.close();
    }
  });
});
