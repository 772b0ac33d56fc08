/**
 * An HTTP answer or SSE stream its client takes nothing of is not held for ever: once nothing
 * has moved on the connection for RUNPLANE_SEND_TIMEOUT_SECONDS, the connection is cut and what
 * was held for it freed. A client that takes a stream slowly, but takes it, is not cut.
 */
import type { Socket } from 'node:net';
import { connect } from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
let runId: string;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_SEND_TIMEOUT_SECONDS: '1', RUNPLANE_MAX_PAYLOAD_BYTES: String(256 * 1024) });
  runId = await newRun(api);
  // About 8 MB of events: more than the kernel's buffers take for a client that reads nothing (about 4 MB here).
  const text = 'x'.repeat(250_000);
  for (let i = 0; i < 32; i++) await appendEvent(api, runId, { payload: { text } });
});

/** Sends `request` on a socket of its own that never reads. */
async function unreadRequest(request: string) {
  const client = connect(Number(new URL(api.url).port), '127.0.0.1');
  await new Promise<void>((resolve) => client.once('connect', () => resolve()));
  client.pause();
  client.write(request);
  return client;
}

const post = (body: string, accept = 'application/json') =>
  `POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: ${accept}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** The server-side socket of the next connection accepted. */
const nextServerSocket = () => new Promise<Socket>((resolve) => api.server.app.server.once('connection', resolve));

test('requests pipelined on one connection are answered one at a time: a client reading none of them holds one answer', async () => {
  const accepted = nextServerSocket();
  const query = JSON.stringify({ query: `{ run(id: "${runId}") { events(first: 32) { edges { node { payload } } } } }` });
  const readsOfRun = (from: number) =>
    api.requestInputs.slice(from).filter((r) => r.name === 'QueryCommand' && JSON.stringify(r.input).includes(runId)).length;
  // What making one answer reads (its pages of 1 MB).
  const once = api.requestInputs.length;
  await api.gql(JSON.parse(query).query);
  const perAnswer = readsOfRun(once);
  const before = api.requestInputs.length;
  // Twenty requests of 8 MB answers in one write, none of them read.
  const client = await unreadRequest(Array.from({ length: 20 }, () => post(query)).join(''));
  const socket = await accepted;
  await waitFor(() => socket.destroyed, { timeoutMs: 60_000, what: 'the connection to be cut' });
  client.destroy();
  // The first was answered; the others waited their turn instead of being made and held.
  expect(readsOfRun(before)).toBeLessThanOrEqual(2 * perAnswer);
}, 90_000);

test('a client pipelining many small requests and reading gets every answer, in order', async () => {
  const client = connect(Number(new URL(api.url).port), '127.0.0.1');
  let received = '';
  client.on('data', (chunk: Buffer) => {
    received += chunk.toString();
  });
  const ask = (n: number) => post(JSON.stringify({ query: `{ n${n}: run(id: "${runId}") { lastSeq } }` }));
  client.write(Array.from({ length: 40 }, (_, n) => ask(n)).join(''));
  await waitFor(() => (received.match(/"n\d+":/g)?.length ?? 0) === 40, { what: 'forty answers' });
  expect(received.match(/"n(\d+)":/g)?.map((m) => Number(m.slice(2, -2)))).toEqual(Array.from({ length: 40 }, (_, n) => n));
  client.destroy();
});

describe('a client that takes nothing of what it asked for', () => {
  test('of an HTTP answer: its connection is cut', async () => {
    const accepted = nextServerSocket();
    const query = JSON.stringify({ query: `{ run(id: "${runId}") { events(first: 32) { edges { node { payload } } } } }` });
    const client = await unreadRequest(post(query));
    const socket = await accepted;
    await waitFor(() => socket.destroyed, { timeoutMs: 30_000, what: 'the connection to be cut' });
    client.destroy();
    expect((await api.gql(`{ run(id: "${runId}") { lastSeq } }`)).data.run.lastSeq).toBe(32);
  }, 60_000);

  test('of an SSE stream: its connection is cut', async () => {
    const accepted = nextServerSocket();
    const subscription = JSON.stringify({ query: `subscription { runEvents(runId: "${runId}", afterSeq: 0) { payload } }` });
    const client = await unreadRequest(post(subscription, 'text/event-stream'));
    const socket = await accepted;
    await waitFor(() => socket.destroyed, { timeoutMs: 30_000, what: 'the stream to be cut' });
    client.destroy();
  }, 60_000);
});

test('a client that takes a stream slowly, a little at a time, gets all of it', async () => {
  const accepted = nextServerSocket();
  const client = connect(Number(new URL(api.url).port), '127.0.0.1');
  let received = '';
  let bytes = 0;
  client.on('data', (chunk: Buffer) => {
    received += chunk.toString();
    const before = bytes;
    bytes += chunk.length;
    // A pause after every megabyte: it takes the stream in several times the send timeout.
    if (Math.floor(before / 1_000_000) !== Math.floor(bytes / 1_000_000)) {
      client.pause();
      setTimeout(() => client.resume(), 250);
    }
  });
  const subscription = JSON.stringify({ query: `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq payload } }` });
  client.write(post(subscription, 'text/event-stream'));
  const socket = await accepted;
  await waitFor(() => received.includes('"seq":32'), { timeoutMs: 50_000, what: 'the last event' });
  expect(received.match(/"seq":\d+/g)).toHaveLength(32);
  expect(socket.destroyed).toBe(false);
  client.destroy();
}, 60_000);
