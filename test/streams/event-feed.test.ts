/** The ordered event feed on its own, over a real table: slow consumers, out-of-order writers, real gaps. */

import { DeleteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import type { RunEvent } from '../../src/domain/run.ts';
import { SendBuffer } from '../../src/lib/send-buffer.ts';
import { ReadShares } from '../../src/store/index.ts';
import { topics } from '../../src/streams/changes.ts';
import { type EventFeedOptions, eventFeed } from '../../src/streams/event-feed.ts';
import { feedTable } from '../../src/streams/feed-table.ts';
import { Hub } from '../../src/streams/hub.ts';
import { appendEvent, newRun, OPEN_TENANT, putEventRow, runPartition } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

/** A feed reading the server's table (its reads of the run's end through `lastSeq` when given). */
function feedOf({
  lastSeq,
  ...options
}: Omit<EventFeedOptions, 'table' | 'sendBuffer'> & { lastSeq?: (tenant: string, id: string) => Promise<number> }) {
  const sendBuffer = new SendBuffer(1024 * 1024);
  const table = feedTable(api.server.stores, new ReadShares({ total: 64, perTenant: 16 }), options.tenant, sendBuffer);
  return eventFeed({ ...options, sendBuffer, table: lastSeq ? { ...table, lastSeq: (id) => lastSeq(options.tenant, id) } : table });
}

/** An event row written straight into the table, as a writer that bypasses the API would. */
const write = (runId: string, seq: number) => putEventRow(api, runId, seq, { bare: true });
/** Pulls everything the feed gives until `count`, slowly if asked. */
async function take(feed: AsyncIterableIterator<RunEvent>, count: number, delayMs = 0) {
  const got: number[] = [];
  const deadline = Date.now() + 20_000;
  while (got.length < count && Date.now() < deadline) {
    const next = await Promise.race([feed.next(), new Promise<undefined>((resolve) => setTimeout(resolve, 5_000))]);
    if (!next || next.done) break;
    got.push(next.value.seq);
    if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  await feed.return?.();
  return got;
}
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('the event feed', () => {
  test('a consumer slower than its queue gets every event, in order, however small the queue', async () => {
    for (const capacity of [1, 2, 3]) {
      const runId = await newRun(api, { budgetCap: 1 });
      for (let i = 1; i <= 10; i++) await api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "x" }) { __typename } }`);
      const feed = feedOf({
        hub: api.server.live.hub,
        tenant: 'default',
        runId,
        afterSeq: 0,
        capacity,
      });
      expect(await take(feed, 10, 2)).toEqual(range(1, 10));
    }
  });

  test('feeds starting live on a run this server watches start where the hub knows it ends: one read, nothing missed or replayed', async () => {
    const runId = await newRun(api, { budgetCap: 1 });
    const append = () => api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "x" }) { __typename } }`);
    for (let i = 1; i <= 3; i++) await append();
    const store = api.server.stores.events;
    let reads = 0;
    // A hub of its own on a clock that stands still (a slow machine must not outwait the end's
    // trust), fed every change of the run the server's hub gets.
    const hub = new Hub(
      (err) => {
        throw err;
      },
      () => 0,
    );
    const stopBridge = api.server.live.hub.subscribe(topics.events('default', runId), {
      change: (change) => hub.publish(change),
      resync: () => hub.resync(),
    });
    const options = {
      hub,
      // The real store, its reads of the run's end counted.
      lastSeq: (tenant: string, id: string) => {
        reads++;
        return store.lastSeq(tenant, id);
      },
      tenant: 'default',
      runId,
    };
    const first = feedOf(options);
    await waitFor(() => hub.endOf(topics.events('default', runId)) === 3, { what: 'the first feed`s read of the end' });
    await append();
    await append();
    const later = Array.from({ length: 5 }, () => feedOf(options));
    await append();
    await append();
    expect(await take(first, 4)).toEqual([4, 5, 6, 7]);
    for (const feed of later) expect(await take(feed, 2)).toEqual([6, 7]);
    expect(reads).toBe(1);
    stopBridge();
  });

  test('a run whose rows expired, created again under its id while a subscriber still listens: a new live subscriber gets its events', async () => {
    const runId = await newRun(api, { budgetCap: 1, events: 5 });
    const store = api.server.stores.events;
    const hub = api.server.live.hub;
    // The reads of the run's end that have come back (what the hub keeps of one may be forgotten
    // again at any time: a late copy of the run's creation from the stream, say).
    let endsRead = 0;
    const lastSeq = async (tenant: string, id: string) => {
      const last = await store.lastSeq(tenant, id);
      endsRead++;
      return last;
    };
    // A subscriber left open on the run (a dashboard), live from its end.
    const old = feedOf({ hub, lastSeq, tenant: 'default', runId });
    await waitFor(() => endsRead === 1, { what: 'the end read' });
    await appendEvent(api, runId);
    expect((await old.next()).value?.seq).toBe(6);
    // A row written behind the API comes by the stream alone: once it is here, so are the
    // stream's copies of the events before it (a TTL deletes rows long after their records passed).
    await write(runId, 7);
    expect((await old.next()).value?.seq).toBe(7);
    // The table's TTL deletes the run's rows (removals are not published).
    const doc = api.server.clients.doc;
    const { Items = [] } = await doc.send(
      new QueryCommand({
        TableName: api.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': runPartition(runId) },
        ConsistentRead: true,
      }),
    );
    for (const { pk, sk } of Items) await doc.send(new DeleteCommand({ TableName: api.table, Key: { pk, sk } }));
    // Long after, this server's own hint of the run's end is forgotten; here one read resets it.
    expect(await store.lastSeq('default', runId)).toBe(0);
    await newRun(api, { id: runId, budgetCap: 1 });
    const fresh = feedOf({ hub, lastSeq, tenant: 'default', runId });
    await waitFor(() => endsRead === 2, { what: 'the new run`s end read' });
    for (let i = 1; i <= 3; i++) expect((await appendEvent(api, runId))?.seq).toBe(i);
    expect(await take(fresh, 3)).toEqual([1, 2, 3]);
    await old.return?.();
  });

  test('a writer that bypasses the API and writes out of order: the late seq is still handed out in its place', async () => {
    const runId = await newRun(api, { budgetCap: 1 });
    const feed = feedOf({ hub: api.server.live.hub, tenant: 'default', runId, afterSeq: 0 });
    const got = take(feed, 4);
    await write(runId, 1);
    await write(runId, 3);
    await write(runId, 4);
    // seq 2 lands a moment later, well inside the wait for a hole.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await write(runId, 2);
    expect(await got).toEqual([1, 2, 3, 4]);
  });

  test('a real gap (a seq never written) is stepped over after the wait, and nothing after it is lost', async () => {
    const runId = await newRun(api, { budgetCap: 1 });
    const feed = feedOf({
      hub: api.server.live.hub,
      tenant: 'default',
      runId,
      afterSeq: 0,
      gapWaitMs: 200,
    });
    const got = take(feed, 3);
    await write(runId, 1);
    await write(runId, 3);
    await write(runId, 4);
    expect(await got).toEqual([1, 3, 4]);
  });

  test('an event seen live but not in the table is waited for, then handed out saying what is missing before it', async () => {
    const runId = await newRun(api, { budgetCap: 1 });
    const feed = feedOf({
      hub: api.server.live.hub,
      tenant: 'default',
      runId,
      afterSeq: 0,
      gapWaitMs: 200,
    });
    const deadline = () => new Promise<undefined>((resolve) => setTimeout(resolve, 20_000));
    const first = feed.next();
    // As the stream brings a row deleted since: seq 2 is never in the table, seq 1 not yet.
    const gone: RunEvent = { runId, seq: 2, type: 'gone', payload: null, createdAt: new Date() };
    api.server.live.hub.publish({ kind: 'event', tenant: OPEN_TENANT, runId, event: gone });
    expect((await Promise.race([first, deadline()]))?.value).toMatchObject({ seq: 2, missingBefore: [{ from: 1, to: 1 }] });
    await write(runId, 1);
    expect((await Promise.race([feed.next(), deadline()]))?.value).toMatchObject({ seq: 1, late: true });
    await feed.return?.();
  });

  test('a subscriber that throws does not keep the others from their changes, nor fail the publisher', async () => {
    const errors: unknown[] = [];
    const hub = new Hub((err) => errors.push(err));
    const seen: number[] = [];
    const topic = topics.events('default', 'r');
    hub.subscribe(topic, {
      change: () => {
        throw new Error('broken subscriber');
      },
      resync: () => {},
    });
    hub.subscribe(topic, { change: (change) => change.kind === 'event' && seen.push(change.event.seq), resync: () => {} });
    const event: RunEvent = { runId: 'r', seq: 7, type: 'x', payload: null, createdAt: new Date() };
    expect(() => hub.publish({ kind: 'event', tenant: 'default', runId: 'r', event })).not.toThrow();
    expect(seen).toEqual([7]);
    expect(errors).toHaveLength(1);
  });
});

describe('subscriptions and their clients', () => {
  test('an SSE request dropped while its subscription starts leaves no listener behind', async () => {
    const runId = await newRun(api, { budgetCap: 1 });
    const before = api.server.live.hub.subscriberCount;
    for (let i = 0; i < 20; i++) {
      const abort = new AbortController();
      const request = fetch(api.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq } }` }),
        signal: abort.signal,
      }).catch(() => undefined);
      setTimeout(() => abort.abort(), i % 4);
      await request;
    }
    await waitFor(() => api.server.live.hub.subscriberCount === before, { what: 'every listener to be gone' });
    expect(api.server.live.openSubscriptions).toBe(0);
  });
});
