/**
 * The stream poller under each failure DynamoDB Streams can hand it, injected through the
 * engine. Events are written straight into the table, so they reach the subscriber only
 * through the stream (or a fill from the table after the poller says it lost its place).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { type Engine, startEngine } from '@runplane/engine';
import type { Client } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { putEventRow } from '../support/runs.ts';
import { startTestServer } from '../support/server.ts';
import { type Collected, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

interface Ev {
  seq: number;
  type: string;
}
const RUN_EVENTS = `subscription($runId: ID!, $afterSeq: Int) { runEvents(runId: $runId, afterSeq: $afterSeq) { seq type } }`;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe.skipIf(onlyEmbedded)('the stream poller', () => {
  let engine: Engine;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
  });
  afterAll(() => engine.close());

  const leftovers: (() => unknown)[] = [];
  afterEach(async () => {
    for (const dispose of leftovers.splice(0).reverse()) await dispose();
    engine.faults.clear();
  });

  /** A server on its own table, a run, and a subscriber to it from seq 0. */
  async function setUp(endpoint = engine.endpoint) {
    const api = await startTestServer({ endpoint, stopAfterAll: false });
    const ws: Client = wsClient(api.url);
    leftovers.push(
      () => api.server.stop(),
      () => ws.dispose(),
    );
    const runId = uniqueName('run');
    await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
      input: { id: runId, task: 't', budgetCap: 1 },
    });
    const sub: Collected<Ev> = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
    leftovers.push(() => sub.stop());
    /** An event row written straight into the table, bypassing the API (and its fast path). */
    const write = (seq: number, type = 'direct') => putEventRow(api, runId, seq, { type, bare: true });
    const writeRange = async (from: number, to: number) => {
      for (const seq of range(from, to)) await write(seq);
    };
    /** Everything received so far is exactly 1..n, once each, in order. */
    const receivedExactly = async (n: number) => {
      await sub.until(n, 15_000);
      await api.server.live.poller.caughtUp();
      expect(sub.items.map((e) => e.seq)).toEqual(range(1, n));
    };
    return { api, runId, sub, write, writeRange, receivedExactly, poller: api.server.live.poller };
  }

  test('ExpiredIteratorException: re-opens after the last record it processed', async () => {
    const { api, writeRange, receivedExactly, poller } = await setUp();
    await writeRange(1, 3);
    await receivedExactly(3);
    await engine.control.expireIterators(api.table);
    await writeRange(4, 6);
    await receivedExactly(6);
    expect(poller.failures.ExpiredIteratorException).toBeGreaterThanOrEqual(1);
  });

  test('TrimmedDataAccessException: re-opens at the trim horizon and the subscriber fills from the table', async () => {
    const { api, writeRange, receivedExactly, poller } = await setUp();
    await writeRange(1, 3);
    await receivedExactly(3);
    // Hold the poller's next read back while records it has not read are trimmed.
    using held = engine.faults.inject({ operations: ['GetRecords'], latencyMs: 400, times: 1 });
    await waitFor(() => held.hits === 1, { what: 'the poller to be held' });
    await writeRange(4, 6);
    await engine.control.trimStream(api.table);
    await receivedExactly(6);
    await writeRange(7, 8);
    await receivedExactly(8);
    expect(poller.failures.TrimmedDataAccessException).toBe(1);
  });

  test('throttling: backs off and keeps its iterator', async () => {
    const { writeRange, receivedExactly, poller } = await setUp();
    using throttled = engine.faults.inject({ operations: ['GetRecords'], error: 'LimitExceededException', times: 4 });
    await writeRange(1, 5);
    await receivedExactly(5);
    expect(throttled.hits).toBe(4);
    expect(poller.failures.LimitExceededException).toBe(4);
  });

  test('a shard that closes: its children are read after it is drained', async () => {
    const { api, write, receivedExactly } = await setUp();
    await write(1);
    await write(2);
    engine.control.rolloverShard(api.table);
    await write(3);
    engine.control.rolloverShard(api.table);
    engine.control.rolloverShard(api.table);
    await write(4);
    await write(5);
    await receivedExactly(5);
  });

  test('an unknown shard or stream: rediscovers and goes on', async () => {
    const { writeRange, receivedExactly, poller } = await setUp();
    using vanished = engine.faults.inject({ operations: ['GetRecords'], error: 'ResourceNotFoundException', times: 1 });
    await writeRange(1, 3);
    await receivedExactly(3);
    expect(vanished.hits).toBe(1);
    expect(poller.failures.ResourceNotFoundException).toBe(1);
  });

  test('a shard that keeps answering ResourceNotFound is backed off from, not hammered', async () => {
    const { writeRange, receivedExactly, poller } = await setUp();
    const before = poller.getRecordsCalls;
    const started = performance.now();
    const vanished = engine.faults.inject({ operations: ['GetRecords'], error: 'ResourceNotFoundException' });
    await waitFor(() => (poller.failures.ResourceNotFoundException ?? 0) >= 3, { timeoutMs: 10_000, what: 'a few refusals' });
    vanished.remove();
    const seconds = (performance.now() - started) / 1000;
    expect(poller.getRecordsCalls - before).toBeLessThanOrEqual(Math.ceil(seconds * 5) + 1);
    await writeRange(1, 3);
    await receivedExactly(3);
  });

  test("the table's stream replaced by a new one: follows the new stream", async () => {
    const { api, writeRange, receivedExactly } = await setUp();
    await writeRange(1, 2);
    await receivedExactly(2);
    const client = api.server.clients.dynamo;
    await client.send(new UpdateTableCommand({ TableName: api.table, StreamSpecification: { StreamEnabled: false } }));
    await client.send(
      new UpdateTableCommand({ TableName: api.table, StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } }),
    );
    await writeRange(3, 5);
    await receivedExactly(5);
  });

  test('GetRecords stays within 5 calls a second per shard, busy or idle', async () => {
    const { writeRange, poller } = await setUp();
    const before = poller.getRecordsCalls;
    const started = performance.now();
    await writeRange(1, 100);
    // Measured over however long it takes to make 5 calls (at 5 a second, about a second).
    await waitFor(() => poller.getRecordsCalls - before >= 5, { timeoutMs: 30_000, what: 'five GetRecords' });
    const seconds = (performance.now() - started) / 1000;
    const calls = poller.getRecordsCalls - before;
    // One shard is open: at most 5 a second, plus the one in flight when measuring began.
    expect(calls).toBeLessThanOrEqual(Math.ceil(seconds * 5) + 1);
    expect(calls).toBeGreaterThan(0);
  });

  test('stops cleanly: no GetRecords after stop()', async () => {
    const { api, poller } = await setUp();
    await api.server.stop();
    // Nothing of it runs any more, so nothing can call GetRecords again.
    expect(poller.busy).toBe(0);
    const after = poller.getRecordsCalls;
    await api.server.live.poller.stop();
    expect(poller.getRecordsCalls).toBe(after);
  });
});

describe.skipIf(onlyEmbedded)('the endpoint vanishing and returning', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'runplane-poller-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  test('the poller backs off while it is gone and reads on when it is back', async () => {
    let engine = await startEngine({ dataDir });
    const port = engine.port;
    const api = await startTestServer({ endpoint: engine.endpoint, stopAfterAll: false, poll: { maxBackoffMs: 300 } });
    const ws = wsClient(api.url);
    try {
      const runId = uniqueName('run');
      await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
        input: { id: runId, task: 't', budgetCap: 1 },
      });
      const sub = subscribeWs<Ev>(ws, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
      const write = (seq: number) => putEventRow(api, runId, seq, { bare: true });
      await write(1);
      await sub.until(1);

      await engine.close();
      const failuresBefore = Object.values(api.server.live.poller.failures).reduce((a, b) => a + b, 0);
      await waitFor(() => Object.values(api.server.live.poller.failures).reduce((a, b) => a + b, 0) > failuresBefore, {
        what: 'the poller to notice the endpoint is gone',
      });
      engine = await startEngine({ dataDir, port });
      await write(2);
      await write(3);
      await sub.until(3, 15_000);
      await api.server.live.poller.caughtUp();
      expect(sub.items.map((e) => e.seq)).toEqual([1, 2, 3]);
      sub.stop();
    } finally {
      await ws.dispose();
      await api.server.stop();
      await engine.close();
    }
  });
});
