/**
 * Subscription delivery: an event is executed and serialized once for subscribers asking
 * alike, yet each subscriber gets exactly the shape it asked for, and failures reach
 * clients masked, as every other error does.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun, putEventRow } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
let ws: Client;
let engine: Awaited<ReturnType<typeof ownEngine>>['engine'];
beforeAll(async () => {
  if (onlyEmbedded) return;
  ({ engine } = await ownEngine());
  api = await startTestServer({ endpoint: engine.endpoint });
  ws = wsClient(api.url);
});
afterAll(async () => {
  await ws?.dispose();
  await engine?.close();
});

const append = (runId: string, type: string, payload: unknown) =>
  api.gql(`mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }`, { input: { runId, type, payload } });

/** A WebSocket client written by hand, to act out what a library client would not: a close left half done. */
async function rawSocket(url: string) {
  const { hostname, port, host } = new URL(url);
  const socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true });
  let received = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    received = Buffer.concat([received, chunk]);
  });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  const frame = (opcode: number, payload: Buffer) => {
    const mask = randomBytes(4);
    const n = payload.length;
    const head = Buffer.from(n < 126 ? [0x80 | opcode, 0x80 | n] : [0x80 | opcode, 0x80 | 126, n >> 8, n & 255]);
    return Buffer.concat([head, mask, Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)))]);
  };
  const text = () => received.toString('latin1');
  socket.write(
    `GET /graphql HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n`,
  );
  await waitFor(() => text().includes('101 Switching Protocols'), { what: 'the upgrade' });
  return {
    text,
    /** Sends a JSON message (under 64 KiB). */
    send: (message: unknown) => socket.write(frame(1, Buffer.from(JSON.stringify(message)))),
    /** Starts the closing handshake, leaving TCP open. */
    sendClose: () => socket.write(frame(8, Buffer.from([0x03, 0xe8]))),
    destroy: () => socket.destroy(),
  };
}

describe.skipIf(onlyEmbedded)('subscription delivery', () => {
  test('an event arriving while the socket is closing does not leave its feed behind', async () => {
    const runId = await newRun(api, { budgetCap: 10 });
    const open = () => api.server.live.openSubscriptions;
    const before = open();
    const raw = await rawSocket(api.url);
    raw.send({ type: 'connection_init', payload: {} });
    await waitFor(() => raw.text().includes('connection_ack'), { what: 'connection_ack' });
    raw.send({
      id: '1',
      type: 'subscribe',
      payload: { query: 'subscription($r: ID!) { runEvents(runId: $r) { seq } }', variables: { r: runId } },
    });
    await waitFor(() => open() === before + 1, { what: 'the subscription to start' });
    raw.sendClose();
    // The server answers the close (opcode 8) and waits for TCP to end: meanwhile an event comes.
    await waitFor(() => raw.text().includes('\x88'), { what: 'the server to answer the close' });
    await append(runId, 'during-close', null);
    raw.destroy();
    await waitFor(() => open() === before, { what: `the feed to close (open: ${open()}, before: ${before})` });
  });

  test('subscribers of one run asking differently each get their own shape; those asking alike the same', async () => {
    const runId = await newRun(api, { budgetCap: 10 });
    const narrow = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq } }',
      { r: runId },
      'runEvents',
    );
    const wide = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq type payload } }',
      { r: runId },
      'runEvents',
    );
    const wideToo = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq type payload } }',
      { r: runId },
      'runEvents',
    );
    const filtered = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!, $t: [String!]) { runEvents(runId: $r, afterSeq: 0, types: $t) { seq type } }',
      { r: runId, t: ['b'] },
      'runEvents',
    );
    const overSse = subscribeSse<Record<string, unknown>>(
      api.url,
      'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq type payload } }',
      { r: runId },
      'runEvents',
    );
    await append(runId, 'a', { n: 1 });
    await append(runId, 'b', { n: 2 });
    await append(runId, 'a', { n: 3 });
    expect(await narrow.until(3)).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }]);
    const full = [
      { seq: 1, type: 'a', payload: { n: 1 } },
      { seq: 2, type: 'b', payload: { n: 2 } },
      { seq: 3, type: 'a', payload: { n: 3 } },
    ];
    expect(await wide.until(3)).toEqual(full);
    expect(await wideToo.until(3)).toEqual(full);
    expect(await overSse.until(3)).toEqual(full);
    expect(await filtered.until(1)).toEqual([{ seq: 2, type: 'b' }]);
    for (const sub of [narrow, wide, wideToo, filtered, overSse]) sub.stop();
  });

  test('DynamoDB failing while a subscriber subscribes: a masked, retryable error, then the end', async () => {
    const runId = await newRun(api, { budgetCap: 10 });
    // Written past the API: this server has not read the run yet, and its subscribe must.
    await putEventRow(api, runId, 1);
    using _ = engine.faults.inject({ operations: ['GetItem', 'Query'], error: 'InternalServerError' });
    const sub = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq } }',
      { r: runId },
      'runEvents',
    );
    const error = await sub.until(1).then(
      () => undefined,
      () => sub.errors[0] as { message: string; extensions?: Record<string, unknown> }[] | { message: string },
    );
    const first = (Array.isArray(error) ? error[0] : error) as { message: string; extensions?: Record<string, unknown> };
    expect(first.message).toMatch(/DynamoDB could not be reached or failed; retry/);
    expect(first.extensions).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(JSON.stringify(error)).not.toMatch(/InternalServerError|stack/);
  });

  test('DynamoDB failing once a live subscription has started: a masked, retryable error, then the end', async () => {
    const runId = await newRun(api, { budgetCap: 10 });
    // The run is found (a GetItem); finding where it ends (a Query), to go live from there, fails.
    using _ = engine.faults.inject({ operations: ['Query'], error: 'InternalServerError' });
    const sub = subscribeWs<Record<string, unknown>>(
      ws,
      'subscription($r: ID!) { runEvents(runId: $r) { seq } }',
      { r: runId },
      'runEvents',
    );
    await expect(sub.until(1)).rejects.toThrow(/subscription failed/);
    const [error] = sub.errors as { message: string; extensions?: Record<string, unknown> }[][];
    const first = (Array.isArray(error) ? error[0] : error) as { message: string; extensions?: Record<string, unknown> };
    expect(first.message).toMatch(/DynamoDB could not be reached or failed; retry/);
    expect(first.extensions).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
  });
});
