/**
 * Clients that stop reading, never finish sending, or open connection after connection. The
 * server (a process of its own, so its memory is its own) holds a bounded amount for each,
 * keeps serving everyone else, and a reader that comes back gets every event once, in order.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type MainProcess, startMain } from '../support/main-process.ts';
import { metric as metricOf } from '../support/metrics.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { waitFor } from '../support/wait.ts';

const WRITER = 'slow-writer-key-0123456789';
const STALLER = 'slow-reader-key-0123456789';
/**
 * The server's heap is capped: unbounded, the unread subscriptions below would hold several
 * times this (as event objects and again as frames) and the process would die.
 */
const HEAP_CAP_MB = 320;
/** The resident set may grow by what the capped heap holds (its garbage included), not by what unbounded buffers would. */
const MAX_GROWTH = HEAP_CAP_MB * 1024 * 1024;
/** The WebSocket case: many subscriptions on one socket (a kernel's socket buffers hold a few MB of it at most). */
const WS = { subscriptions: 200, events: 30, payloadBytes: 48 * 1024 };
/** The SSE case: one stream per connection, each far longer than what the kernel buffers for a socket. */
const SSE = { streams: 20, events: 300, payloadBytes: 64 * 1024 };

let server: MainProcess;
let url = '';
let port = 0;

async function gql(query: string, variables: Record<string, unknown> = {}, key = WRITER) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: Record<string, { __typename?: string }>; errors?: unknown[] };
}

const metric = (name: string) => metricOf(url, name);

beforeAll(async () => {
  server = startMain({
    RUNPLANE_IN_MEMORY: 'true',
    RUNPLANE_API_KEYS: `${WRITER}=acme,${STALLER}=stalled`,
    RUNPLANE_REQUEST_TIMEOUT_SECONDS: '2',
    RUNPLANE_KEEP_ALIVE_SECONDS: '1',
    RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS: '200',
    RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION: '200',
    RUNPLANE_SUBSCRIBE_RATE: '1000',
    // However long a slow machine takes to fill the buffers, the unread socket stays a stall, not a cut one (keepalive.test.ts).
    RUNPLANE_WS_PING_SECONDS: '600',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}`,
  });
  await waitFor(() => /Runplane is up: (\S+)/.test(server.output()), { timeoutMs: 60_000, what: 'the server' });
  url = /Runplane is up: (\S+)/.exec(server.output())?.[1] as string;
  port = Number(new URL(url).port);
}, 90_000);

afterAll(async () => {
  server.child.kill('SIGTERM');
  await server.exited;
});

/** A run of the stalled tenant with `events` events of `payloadBytes` each. */
async function bigRun(id: string, { events, payloadBytes }: { events: number; payloadBytes: number }) {
  await gql('mutation($id: ID!) { createRun(input: { id: $id, task: "big", budgetCap: 1 }) { __typename } }', { id }, STALLER);
  const blob = 'x'.repeat(payloadBytes - 100);
  for (let i = 1; i <= events; i++) {
    const appended = await gql(
      'mutation($id: ID!, $p: JSON) { appendEvent(input: { runId: $id, type: "big", payload: $p }) { __typename } }',
      { id, p: { i, blob } },
      STALLER,
    );
    expect(appended.data?.appendEvent?.__typename).toBe('Event');
  }
}

describe('a WebSocket that stops reading', () => {
  test(`with ${WS.subscriptions} subscriptions replaying a run of large events: bounded memory, others served, then every event once in order`, async () => {
    const { subscriptions: SUBSCRIPTIONS, events: EVENTS } = WS;
    await bigRun('ws-big', WS);
    const baseline = await metric('runplane_process_resident_memory_bytes');
    const socket = await rawSocket(url, { connectionParams: { authorization: `Bearer ${STALLER}` }, keepUnder: 0 });
    socket.pause();
    for (let i = 0; i < SUBSCRIPTIONS; i++)
      socket.subscribe(`s${i}`, 'subscription { runEvents(runId: "ws-big", afterSeq: 0) { seq payload } }');
    // The client's socket buffers fill (the kernel takes a few MB), then the server's budget for it;
    // the feeds with events left fall back to the table.
    await waitFor(async () => (await metric('runplane_subscriptions_lagging')) >= SUBSCRIPTIONS / 2, {
      timeoutMs: 60_000,
      what: 'the subscriptions to fall behind',
    });
    let peak = 0;
    for (let i = 0; i < 10; i++) {
      peak = Math.max(peak, (await metric('runplane_process_resident_memory_bytes')) - baseline);
      // The budget (1 MiB), and what the events handed over for the frames in flight hold beside it.
      expect(await metric('runplane_send_buffered_bytes')).toBeLessThanOrEqual(2 * 1024 * 1024 + 2 * (WS.payloadBytes + 1024));
      // Another tenant is served meanwhile.
      expect((await gql('{ runs(first: 1) { edges { cursor } } }')).errors).toBeUndefined();
    }
    expect(peak).toBeLessThan(MAX_GROWTH);

    socket.resume();
    await socket.until(
      (frames) => frames.filter((f) => f.type === 'next').length >= SUBSCRIPTIONS * EVENTS,
      'every event to every subscription',
      120_000,
    );
    const byId = new Map<string, number[]>();
    for (const frame of socket.frames)
      if (frame.type === 'next') byId.set(frame.id as string, [...(byId.get(frame.id as string) ?? []), frame.seq as number]);
    const expected = Array.from({ length: EVENTS }, (_, i) => i + 1);
    expect(byId.size).toBe(SUBSCRIPTIONS);
    for (const seqs of byId.values()) expect(seqs).toEqual(expected);
    socket.close();
  }, 240_000);
});

describe('SSE streams that stop reading', () => {
  test(`${SSE.streams} unread streams on a run of large events hold a bounded amount; one read later gets every event once in order`, async () => {
    const EVENTS = SSE.events;
    await bigRun('sse-big', SSE);
    const baseline = await metric('runplane_process_resident_memory_bytes');
    const sockets: Socket[] = [];
    const body = JSON.stringify({ query: 'subscription { runEvents(runId: "sse-big", afterSeq: 0) { seq payload } }' });
    const request = [
      'POST /graphql HTTP/1.1',
      `host: 127.0.0.1:${port}`,
      'content-type: application/json',
      'accept: text/event-stream',
      `authorization: Bearer ${STALLER}`,
      `content-length: ${Buffer.byteLength(body)}`,
      '',
      body,
    ].join('\r\n');
    const received: string[] = [];
    for (let i = 0; i < SSE.streams; i++) {
      const socket = connect(port, '127.0.0.1');
      socket.write(request);
      socket.pause();
      sockets.push(socket);
    }
    const reader = sockets[0] as Socket;
    reader.on('data', (chunk: Buffer) => received.push(chunk.toString('latin1')));
    await waitFor(async () => (await metric('runplane_subscriptions_lagging')) >= SSE.streams - 1, {
      timeoutMs: 60_000,
      what: 'the streams to fall behind',
    });
    let peak = 0;
    for (let i = 0; i < 10; i++) {
      peak = Math.max(peak, (await metric('runplane_process_resident_memory_bytes')) - baseline);
      // One budget (1 MiB) per stream, and the events handed over for the frames in flight.
      expect(await metric('runplane_send_buffered_bytes')).toBeLessThanOrEqual(SSE.streams * (2 * 1024 * 1024 + 2 * SSE.payloadBytes));
      expect((await gql('{ __typename }')).errors).toBeUndefined();
    }
    expect(peak).toBeLessThan(MAX_GROWTH);
    reader.resume();
    const seqs = () => [...received.join('').matchAll(/"seq":(\d+)/g)].map((m) => Number(m[1]));
    await waitFor(() => seqs().length >= EVENTS, { timeoutMs: 60_000, what: 'the resumed stream to catch up' });
    expect(seqs()).toEqual(Array.from({ length: EVENTS }, (_, i) => i + 1));
    for (const socket of sockets) socket.destroy();
  }, 240_000);
});

describe('slow and idle connections', () => {
  /** Opens a raw connection and reports how it ends: what the server wrote, and when it closed. */
  function rawConnection(write: (socket: Socket) => void) {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    const ended = new Promise<string>((resolve) => socket.on('close', () => resolve(answer)));
    socket.on('connect', () => write(socket));
    socket.on('error', () => undefined);
    return { socket, ended };
  }

  test('a body sent a byte at a time is cut at the request deadline; without a key it is refused at once', async () => {
    const head = (key?: string) =>
      `POST /graphql HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 102400\r\n${key ? `authorization: Bearer ${key}\r\n` : ''}\r\n`;
    const slow = rawConnection((socket) => {
      socket.write(head(WRITER));
      const drip = setInterval(() => socket.writable && socket.write('{'), 500);
      socket.on('close', () => clearInterval(drip));
    });
    const keyless = rawConnection((socket) => socket.write(head()));
    expect(await keyless.ended).toMatch(/^HTTP\/1\.1 401/);
    expect(await slow.ended).toMatch(/^HTTP\/1\.1 408/);
  }, 30_000);

  test('an idle keep-alive connection is closed; connections past the per-address cap get 429', async () => {
    const idle = rawConnection((socket) => socket.write(`GET /health HTTP/1.1\r\nhost: x\r\n\r\n`));
    expect(await idle.ended).toMatch(/^HTTP\/1\.1 200[\s\S]*alive/);

    const held = Array.from({ length: 200 }, () => connect(port, '127.0.0.1'));
    await Promise.all(held.map((socket) => new Promise((resolve) => socket.on('connect', resolve))));
    const refused = rawConnection(() => undefined);
    expect(await refused.ended).toMatch(/^HTTP\/1\.1 429[\s\S]*RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS/);
    for (const socket of held) socket.destroy();
    await waitFor(async () => (await fetch(new URL('/health', url))).ok, { what: 'a connection to be served again' });
  }, 30_000);
});
