/**
 * A WebSocket client that does not read what it is sent is cut, whatever else it sends: pongs
 * it was never asked for do not keep it; what it asks for while it leaves its send buffer and
 * one answer unread waits until it reads, and more than 16 such requests waiting get it cut. A
 * client reading as fast as it can gets every answer of a burst. Queries and mutations running
 * at once on one socket are bounded.
 */
import type { Socket } from 'node:net';
import type { Engine } from '@runplane/engine';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { MAX_OPERATIONS_IN_FLIGHT } from '../../src/http/websocket.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { metric } from '../support/metrics.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const subscriptionsOpen = (api: TestServer) => metric(api.url, 'runplane_subscriptions_open');
const events = (runId: string) => `subscription { runEvents(runId: "${runId}") { seq } }`;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('a client that sends pongs of its own but reads nothing', () => {
  let api: TestServer;
  beforeAll(async () => {
    api = await startTestServer({ RUNPLANE_WS_PING_SECONDS: '1' });
  });
  afterAll(() => api.server.stop());

  test('is cut (1006) once a ping of the server goes unanswered, and its subscription freed', async () => {
    const runId = await newRun(api);
    const staller = await rawSocket(api.url);
    staller.subscribe('s', events(runId));
    await waitFor(async () => (await subscriptionsOpen(api)) === 1, { what: 'the subscription' });
    staller.pause();
    // Unasked pongs, ten a second: graphql-ws's own keepalive took any of them as the answer.
    const pongs = setInterval(() => staller.socket.pong(), 100);
    try {
      await waitFor(async () => (await subscriptionsOpen(api)) === 0, {
        timeoutMs: 60_000,
        what: "the staller's subscription to be freed",
      });
    } finally {
      clearInterval(pongs);
    }
    staller.resume();
    expect((await staller.closed).code).toBe(1006);
  }, 90_000);
});

describe('a client taking a large backlog steadily', () => {
  let api: TestServer;
  beforeAll(async () => {
    // Two seconds: a loaded machine (other test files beside this one) delays both ends' reads.
    api = await startTestServer({ RUNPLANE_WS_PING_SECONDS: '2' });
  });
  afterAll(() => api.server.stop());

  test('is not cut while it reads on at about 4 MiB a ping interval', async () => {
    const reader = await rawSocket(api.url, { keepUnder: 0 });
    reader.pause();
    // Twenty-four pongs of 512 KB queued for it: 12 MiB, more than the kernels' buffers take.
    const payload = { blob: 'x'.repeat(512 * 1024) };
    for (let i = 0; i < 24; i++) reader.send({ type: 'ping', payload });
    // Then read, half a second's pause after each MiB: a backlog taken over several ping intervals.
    let bytes = 0;
    reader.socket.on('message', (data: Buffer) => {
      const before = bytes;
      bytes += data.length;
      if (Math.floor(before / 2 ** 20) !== Math.floor(bytes / 2 ** 20)) {
        reader.pause();
        setTimeout(() => reader.resume(), 500);
      }
    });
    reader.resume();
    await reader.until(
      (frames) => {
        // Cut meanwhile: say so now, not after the wait.
        if (reader.socket.readyState !== reader.socket.OPEN) throw new Error(`the reader was cut after ${bytes} bytes`);
        return frames.filter((f) => f.type === 'pong').length === 24;
      },
      'every pong',
      60_000,
    );
    expect(reader.socket.readyState).toBe(reader.socket.OPEN);
    reader.close();
  }, 90_000);
});

describe('a client that pings before connection_init and reads nothing', () => {
  let api: TestServer;
  beforeAll(async () => {
    api = await startTestServer({ RUNPLANE_WS_PING_SECONDS: '3600', RUNPLANE_SEND_BUFFER_BYTES: String(64 * 1024) });
  });
  afterAll(() => api.server.stop());

  test('is cut once the pongs it leaves unread pass its send buffer (nobody has let it in yet)', async () => {
    const upgraded = new Promise<Socket>((resolve) => api.server.app.server.once('upgrade', (_req, socket: Socket) => resolve(socket)));
    const pinger = await rawSocket(api.url, { init: false });
    const served = await upgraded;
    pinger.pause();
    // Forty pings of 200 KB, each answered with its payload: 8 MB, twice what the kernel's buffers take.
    const payload = { blob: 'x'.repeat(200_000) };
    for (let i = 0; i < 40 && pinger.socket.readyState === pinger.socket.OPEN; i++) pinger.send({ type: 'ping', payload });
    await waitFor(() => served.destroyed, { timeoutMs: 30_000, what: 'the pinger to be cut' });
    pinger.resume();
    expect((await pinger.closed).code).toBe(1006);
  }, 60_000);
});

describe('a client asking for answers it does not read', () => {
  let api: TestServer;
  beforeAll(async () => {
    // No ping would cut it in this test's time: only what it leaves unread does.
    api = await startTestServer({
      RUNPLANE_WS_PING_SECONDS: '3600',
      RUNPLANE_SEND_BUFFER_BYTES: String(64 * 1024),
      RUNPLANE_MAX_RESPONSE_BYTES: String(256 * 1024),
    });
  });
  afterAll(() => api.server.stop());

  test('is cut once more requests wait for it to read than a socket may keep waiting; others are served', async () => {
    const printed = vi.spyOn(console, 'error');
    const runId = await newRun(api);
    const text = 'x'.repeat(40_000);
    for (let i = 0; i < 4; i++) await appendEvent(api, runId, { payload: { text } });
    const staller = await rawSocket(api.url);
    staller.subscribe('s', events(runId));
    await waitFor(async () => (await subscriptionsOpen(api)) === 1, { what: 'the subscription' });
    staller.pause();
    const pongs = setInterval(() => staller.socket.pong(), 100);
    // Each answer is about 160 KB: three hundred of them (48 MB) are far more than the kernel's buffers take.
    const query = `{ run(id: "${runId}") { events(first: 4) { edges { node { payload } } } } }`;
    for (let i = 0; i < 300 && staller.socket.readyState === staller.socket.OPEN; i++) {
      staller.send({ id: `q${i}`, type: 'subscribe', payload: { query } });
      await new Promise((resolve) => setImmediate(resolve));
    }
    try {
      await waitFor(async () => (await subscriptionsOpen(api)) === 0, { timeoutMs: 60_000, what: 'the staller to be cut' });
    } finally {
      clearInterval(pongs);
    }
    staller.resume();
    expect((await staller.closed).code).toBe(1006);
    expect((await api.gql(query)).data.run.events.edges).toHaveLength(4);
    // The answers it never took are not the server's faults: nothing about them on stderr.
    expect(printed.mock.calls.filter((call) => String(call[0]).includes('Internal error'))).toEqual([]);
  }, 90_000);

  test('reading as fast as it can, it gets every answer of a burst larger than its send buffer and one answer', async () => {
    const runId = await newRun(api);
    const text = 'x'.repeat(40_000);
    for (let i = 0; i < 4; i++) await appendEvent(api, runId, { payload: { text } });
    const reader = await rawSocket(api.url);
    const query = `{ run(id: "${runId}") { events(first: 4) { edges { node { payload } } } } }`;
    // Eight answers of about 160 KB at once: 1.3 MB, against 64 KB and one 256 KB answer.
    for (let i = 0; i < 8; i++) reader.send({ id: `q${i}`, type: 'subscribe', payload: { query } });
    await reader.until((frames) => frames.filter((f) => f.type === 'complete').length === 8, 'every answer', 60_000);
    expect(reader.frames.filter((f) => f.type === 'next')).toHaveLength(8);
    expect(reader.socket.readyState).toBe(reader.socket.OPEN);
    reader.close();
  }, 90_000);
});

describe.skipIf(onlyEmbedded)('queries at once on one socket', () => {
  let engine: Engine;
  let api: TestServer;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    api = await startTestServer({ endpoint: engine.endpoint });
  });
  afterAll(async () => {
    await api.server.stop();
    await engine.close();
  });

  test(`at most ${MAX_OPERATIONS_IN_FLIGHT} run at once; one more is refused with LIMIT_EXCEEDED, the rest answered`, async () => {
    const runId = await newRun(api);
    const socket = await rawSocket(api.url);
    const query = `{ run(id: "${runId}") { id } }`;
    const count = MAX_OPERATIONS_IN_FLIGHT + 4;
    {
      // Every read of the run takes a while: all of them are in flight together.
      using _ = engine.faults.inject({ operations: ['Query'], latencyMs: 1_500 });
      for (let i = 0; i < count; i++) socket.send({ id: `q${i}`, type: 'subscribe', payload: { query } });
      await socket.until((frames) => frames.filter((f) => f.type === 'complete' || f.type === 'error').length === count, 'every answer');
    }
    const answers = socket.frames
      .filter((f) => f.type === 'next')
      .map((f) => f.message?.payload as { data?: unknown; errors?: { extensions?: { code?: string } }[] });
    const refused = answers.filter((a) => a.errors?.[0]?.extensions?.code === 'LIMIT_EXCEEDED');
    expect(refused).toHaveLength(count - MAX_OPERATIONS_IN_FLIGHT);
    expect(answers.filter((a) => a.data && !a.errors)).toHaveLength(MAX_OPERATIONS_IN_FLIGHT);
    // Once answered, the socket runs as many again.
    socket.send({ id: 'after', type: 'subscribe', payload: { query } });
    await socket.until((frames) => frames.some((f) => f.type === 'next' && f.id === 'after'), 'the next answer');
    socket.close();
  }, 60_000);
});
