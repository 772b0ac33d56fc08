/**
 * runEvents through the client against a real server, over WebSocket and over SSE: across a
 * server restart and across dropped connections, while appends go on, it hands out 1..N
 * exactly once, in order; it ends when its signal aborts.
 */

import type { Runplane } from 'runplane/client';
import { describe, expect, test } from 'vitest';
import { collect, testClient } from '../support/client.ts';
import { tcpProxy } from '../support/proxy.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

/** Appends `count` events one after another through `client` (which retries through outages); resolves with the seqs. */
async function appendMany(client: Runplane, runId: string, count: number, onEach?: (seq: number) => Promise<void> | void) {
  const seqs: number[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await client.appendEvent({ runId, type: 'step', payload: { i } });
    if (answer.__typename !== 'Event') throw new Error(`append ${i} answered ${answer.__typename}`);
    seqs.push(answer.seq);
    await onEach?.(answer.seq);
  }
  return seqs;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
/** Survives a restart of a second or two: quick, many attempts. */
const patient = { maxAttempts: 200, baseDelayMs: 20, maxDelayMs: 200, deadlineMs: 60_000 };

describe.each(['ws', 'sse'] as const)('over %s', (transport) => {
  test('across a server restart while appends go on: 1..N exactly once, in order', async () => {
    let api: TestServer = await startTestServer({ stopAfterAll: false });
    const runId = await newRun(api);
    const { client: writer } = testClient(api.url, { retry: patient });
    const { client: reader, notices } = testClient(api.url, { transport, reconnect: patient });
    const stop = new AbortController();
    const seen = collect(reader.runEvents(runId, { afterSeq: 0, signal: stop.signal }));
    try {
      const written = await appendMany(writer, runId, 40, async (seq) => {
        if (seq !== 15) return;
        await waitFor(() => seen.items.length >= 10, { timeoutMs: 20_000, what: 'the reader to be live' });
        const { table, url } = api;
        await api.server.stop();
        api = await startTestServer({ table, env: { PORT: new URL(url).port }, stopAfterAll: false });
      });
      expect(written).toEqual(range(1, 40));
      await waitFor(() => seen.items.length >= 40, { timeoutMs: 30_000, what: `40 events (have ${seen.items.length})` });
      expect(seen.items.map((event) => event.seq)).toEqual(range(1, 40));
      expect(seen.items.every((event) => !event.late && event.missingBefore.length === 0)).toBe(true);
      // It did reconnect: the restart was seen, not slept through.
      expect(notices.some((notice) => notice.kind === 'reconnect' && notice.reason === 'error')).toBe(true);
      stop.abort();
      await seen.done;
      expect(seen.failure).toBeUndefined();
    } finally {
      stop.abort();
      await api.server.stop();
    }
  });

  test('across dropped connections while appends go on: 1..N exactly once, in order', async () => {
    const api = await startTestServer();
    const proxy = await tcpProxy(api.url);
    const runId = await newRun(api);
    const { client: writer } = testClient(api.url);
    const { client: reader, notices } = testClient(proxy.url, { transport, reconnect: patient });
    const stop = new AbortController();
    const seen = collect(reader.runEvents(runId, { afterSeq: 0, signal: stop.signal }));
    try {
      await appendMany(writer, runId, 60, async (seq) => {
        // Three cuts, each once the reader is live (it must hold a connection to lose one).
        if (seq % 15 !== 0 || seq === 60) return;
        await waitFor(() => seen.items.length >= seq - 5, { timeoutMs: 20_000, what: `the reader near seq ${seq}` });
        proxy.drop();
      });
      await waitFor(() => seen.items.length >= 60, { timeoutMs: 30_000, what: `60 events (have ${seen.items.length})` });
      expect(seen.items.map((event) => event.seq)).toEqual(range(1, 60));
      expect(proxy.dropped).toBeGreaterThanOrEqual(3);
      expect(notices.filter((notice) => notice.kind === 'reconnect').length).toBeGreaterThanOrEqual(3);
    } finally {
      stop.abort();
      await seen.done;
      await proxy.close();
    }
  });

  test('live from now, with a type filter; ends when its signal aborts', async () => {
    const api = await startTestServer();
    const runId = await newRun(api);
    const { client } = testClient(api.url, { transport });
    await appendMany(client, runId, 3);
    const stop = new AbortController();
    const seen = collect(client.runEvents(runId, { types: ['wanted'], signal: stop.signal }));
    for (const type of ['skipped', 'wanted', 'skipped', 'wanted']) await client.appendEvent({ runId, type });
    await waitFor(() => seen.items.length >= 2, { what: 'the wanted events' });
    expect(seen.items.map((event) => [event.seq, event.type])).toEqual([
      [5, 'wanted'],
      [7, 'wanted'],
    ]);
    stop.abort();
    await seen.done;
    expect(seen.ended).toBe(true);
    expect(seen.failure).toBeUndefined();
    await waitFor(() => api.server.live.openSubscriptions === 0, { what: 'the server to let the subscription go' });
  });

  test('a run that does not exist is a RunplaneError NOT_FOUND, not retried', async () => {
    const api = await startTestServer();
    const { client, notices } = testClient(api.url, { transport });
    for (const afterSeq of [undefined, 0]) {
      const seen = collect(client.runEvents('no-such-run', { afterSeq }));
      await seen.done;
      expect(seen.failure).toMatchObject({ name: 'RunplaneError', code: 'NOT_FOUND', retryable: false });
      expect(String((seen.failure as Error).message)).toMatch(/run no-such-run does not exist/);
    }
    expect(notices.filter((notice) => notice.kind === 'reconnect')).toEqual([]);
  });
});
