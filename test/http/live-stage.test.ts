/**
 * The live stage: a WebSocket subscriber whose feed is caught up gets each event written to its
 * socket in the feed's own turn (the publisher's, or the page read's), with no promise and no
 * loop step per event; what it writes is what the per-result path writes, frame for frame, and
 * a server with plugins of its own keeps every result on their hooks.
 */
import { Socket } from 'node:net';
import type { GraphQLObjectType } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import WebSocket from 'ws';
import { Results } from '../../src/http/subscriptions/shared-execution.ts';
import { SendBuffer } from '../../src/lib/send-buffer.ts';
import { schema } from '../../src/schema/index.ts';
import { metric } from '../support/metrics.ts';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

/** A plugin with a per-result hook that changes nothing: the server then delivers every result through the hooks. */
const passThrough: Plugin = {
  onSubscribe: () => ({ onSubscribeResult: () => ({ onNext: () => undefined }) }),
};

let staged: TestServer;
let hooked: TestServer;
beforeAll(async () => {
  [staged, hooked] = await Promise.all([startTestServer(), startTestServer({ plugins: [passThrough] })]);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A raw graphql-transport-ws client: every text frame the server sent, as sent. */
async function rawSubscriber(api: TestServer, id: string, query: string, variables: Record<string, unknown>) {
  const socket = new WebSocket(api.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
  const frames: string[] = [];
  socket.on('message', (data) => frames.push(String(data)));
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  socket.send(JSON.stringify({ type: 'connection_init', payload: {} }));
  await waitFor(() => frames.some((frame) => frame.includes('connection_ack')), { what: 'connection_ack' });
  socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables } }));
  const nexts = () => frames.filter((frame) => frame.includes('"type":"next"'));
  return { socket, frames, nexts, close: () => socket.close() };
}

const EVENTS = 'subscription($runId: ID!, $after: Int) { runEvents(runId: $runId, afterSeq: $after) { seq type payload } }';

describe('the live stage', () => {
  test('a caught-up subscriber costs no next() per event: one parked call while events flow', async () => {
    const runId = await newRun(staged);
    const next = vi.spyOn(Results.prototype, 'next');
    const subscribers = await Promise.all([1, 2, 3].map((n) => rawSubscriber(staged, `s${n}`, EVENTS, { runId })));
    // Live from now: subscribed once the run's end is known (the first next() has been asked).
    await waitFor(() => next.mock.calls.length >= 3, { what: 'the three subscriptions started' });
    for (let i = 0; i < 20; i++) await appendEvent(staged, runId, { payload: { i } });
    await waitFor(() => subscribers.every((s) => s.nexts().length >= 20), { what: '20 events at each subscriber' });
    for (const s of subscribers) {
      expect(s.nexts().map((frame) => JSON.parse(frame).payload.data.runEvents.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      s.close();
    }
    expect(next.mock.calls.length).toBeLessThanOrEqual(3);
  });

  test('with a plugin of the server, every result passes its hooks: a next() per event', async () => {
    const runId = await newRun(hooked);
    const next = vi.spyOn(Results.prototype, 'next');
    const subscriber = await rawSubscriber(hooked, 's', EVENTS, { runId });
    await waitFor(() => next.mock.calls.length >= 1, { what: 'the subscription started' });
    for (let i = 0; i < 10; i++) await appendEvent(hooked, runId, { payload: { i } });
    await waitFor(() => subscriber.nexts().length >= 10, { what: '10 events' });
    subscriber.close();
    expect(next.mock.calls.length).toBeGreaterThanOrEqual(10);
  });

  test("events are resolved by plans on a server of its own, by graphql-js (with every resolver's info) on one with plugins", async () => {
    // Event.payload's resolver, as both servers' schema holds it: graphql-js hands it an info, a plan does not.
    const payloadField = (schema.getType('Event') as GraphQLObjectType).getFields().payload as { resolve: (...args: unknown[]) => unknown };
    const resolve = vi.spyOn(payloadField, 'resolve');
    const infos = await Promise.all(
      [staged, hooked].map(async (api) => {
        const runId = await newRun(api, { events: [{ n: 1 }, { n: 2 }] });
        const subscriber = await rawSubscriber(api, 's', EVENTS, { runId, after: 0 });
        await waitFor(() => subscriber.nexts().length >= 2, { what: 'the events' });
        subscriber.close();
        return resolve.mock.calls.filter((call) => (call[0] as { runId: string }).runId === runId).map((call) => call[3]);
      }),
    );
    expect(infos[0]).toEqual([undefined, undefined]);
    expect(infos[1]).toHaveLength(2);
    expect(infos[1]?.every((info) => (info as { fieldName?: string } | undefined)?.fieldName === 'payload')).toBe(true);
  });

  test('writes the frames the per-result path writes, caught up and live', async () => {
    const payloads: unknown[] = [
      { text: 'ünïcode \u2028 "quoted" \\ </script>' },
      null,
      { pad: 'x'.repeat(40_000) },
      { list: [1, { deep: true }], constructor: 1 },
    ];
    const frames = await Promise.all(
      [staged, hooked].map(async (api) => {
        const runId = await newRun(api, { events: payloads.slice(0, 2) });
        const subscriber = await rawSubscriber(api, 'same-id', EVENTS, { runId, after: 0 });
        await waitFor(() => subscriber.nexts().length >= 2, { what: 'the caught-up events' });
        for (const payload of payloads.slice(2)) await appendEvent(api, runId, { payload });
        await waitFor(() => subscriber.nexts().length >= payloads.length, { what: 'the live events' });
        subscriber.close();
        return subscriber.nexts();
      }),
    );
    expect(frames[0]).toHaveLength(payloads.length);
    expect(frames[0]).toEqual(frames[1]);
    expect(frames[0]?.map((frame) => JSON.parse(frame).payload.data.runEvents.payload)).toEqual(payloads);
  });

  test('a frame holds its size in the send buffer in bytes as sent (UTF-8), not in characters', async () => {
    const runId = await newRun(staged);
    const held = vi.spyOn(SendBuffer.prototype, 'hold');
    const subscriber = await rawSubscriber(staged, 'bytes', EVENTS, { runId, after: 0 });
    await appendEvent(staged, runId, { payload: { text: 'あ'.repeat(1000) } });
    await waitFor(() => subscriber.nexts().length >= 1, { what: 'the event' });
    const [frame] = subscriber.nexts() as [string];
    // 1,000 characters of 3 bytes each: the frame is about 3,000 bytes, not 1,000.
    expect(Buffer.byteLength(frame)).toBeGreaterThan(3000);
    expect(held.mock.calls.map(([bytes]) => bytes)).toContain(Buffer.byteLength(frame));
    subscriber.close();
  });

  test("frames that wait behind others in their socket have memory of their own, not a slice of Node's pool", async () => {
    const runId = await newRun(staged);
    for (let i = 0; i < 20; i++) await appendEvent(staged, runId, { payload: { i } });
    const write = Socket.prototype.write;
    const frames: Buffer[] = [];
    vi.spyOn(Socket.prototype, 'write').mockImplementation(function (this: Socket, ...args: unknown[]) {
      if (Buffer.isBuffer(args[0]) && args[0].includes('"type":"next"')) frames.push(args[0]);
      return (write as (...args: unknown[]) => boolean).apply(this, args);
    });
    // A replay is one burst, corked: every frame after the first waits behind it in the socket.
    const subscriber = await rawSubscriber(staged, 's', EVENTS, { runId, after: 0 });
    await waitFor(() => subscriber.nexts().length >= 20, { what: 'the 20 events' });
    subscriber.close();
    // A slice of the pool keeps its whole 8 KiB block alive for as long as the frame waits.
    expect(frames.filter((frame) => frame.buffer.byteLength === frame.length).length).toBeGreaterThanOrEqual(19);
  });

  test('a client offering permessage-deflate is answered without it (its frames come uncompressed)', async () => {
    const socket = new WebSocket(staged.url.replace(/^http/, 'ws'), 'graphql-transport-ws', { perMessageDeflate: true });
    const frames: string[] = [];
    socket.on('message', (data) => frames.push(String(data)));
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    expect(socket.extensions).toBe('');
    socket.send(JSON.stringify({ type: 'connection_init', payload: {} }));
    await waitFor(() => frames.some((frame) => frame.includes('connection_ack')), { what: 'connection_ack' });
    socket.close();
  });

  test('a frame the socket refuses to take holds nothing in the send buffer, and the event still comes, once', async () => {
    const runId = await newRun(staged);
    const next = vi.spyOn(Results.prototype, 'next');
    const subscriber = await rawSubscriber(staged, 's', EVENTS, { runId, after: 0 });
    await waitFor(() => next.mock.calls.length >= 1, { what: 'the subscription started' });
    // The server's TCP socket refuses the first next frame once (a fault in the real socket): the
    // stage declines the event, and the loop writes it.
    const write = Socket.prototype.write;
    let refused = 0;
    vi.spyOn(Socket.prototype, 'write').mockImplementation(function (this: Socket, ...args: unknown[]) {
      if (refused === 0 && Buffer.isBuffer(args[0]) && args[0].includes('"type":"next"')) {
        refused++;
        throw new Error('refused');
      }
      return (write as (...args: unknown[]) => boolean).apply(this, args);
    });
    await appendEvent(staged, runId, { payload: { n: 1 } });
    await waitFor(() => subscriber.nexts().length >= 1, { what: 'the event' });
    vi.mocked(Socket.prototype.write).mockRestore();
    await appendEvent(staged, runId, { payload: { n: 2 } });
    await waitFor(() => subscriber.nexts().length >= 2, { what: 'the next event' });
    expect(refused).toBe(1);
    expect(subscriber.nexts().map((frame) => JSON.parse(frame).payload.data.runEvents.seq)).toEqual([1, 2]);
    await waitFor(async () => (await metric(staged.url, 'runplane_send_buffered_bytes')) === 0, { what: 'the send buffer empty' });
    subscriber.close();
    expect(next).toHaveBeenCalled();
  });
});
