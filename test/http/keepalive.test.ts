/**
 * WebSocket keepalive: the server pings every socket and cuts one that has not answered by
 * the next ping, freeing its subscriptions. A peer that vanished without a FIN and a reader
 * that stopped reading look the same from here (the pong waits behind unread frames).
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { metric } from '../support/metrics.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_WS_PING_SECONDS: '1' });
  await api.gql('mutation { createRun(input: { id: "kept", task: "keepalive", budgetCap: 1 }) { __typename } }');
});

const subscriptionsOpen = () => metric(api.url, 'runplane_subscriptions_open');

const SUBSCRIPTION = 'subscription { runEvents(runId: "kept") { seq } }';

describe('WebSocket keepalive', () => {
  test('a socket that stops reading is cut (1006) once a ping goes unanswered, and its subscription freed; one that reads stays', async () => {
    const reader = await rawSocket(api.url);
    let pings = 0;
    reader.socket.on('ping', () => pings++);
    reader.subscribe('r', SUBSCRIPTION);
    const staller = await rawSocket(api.url);
    staller.subscribe('s', SUBSCRIPTION);
    await waitFor(async () => (await subscriptionsOpen()) === 2, { timeoutMs: 30_000, what: 'both subscriptions' });

    staller.pause();
    await waitFor(async () => (await subscriptionsOpen()) === 1, { timeoutMs: 60_000, what: "the staller's subscription to be freed" });
    staller.resume();
    expect((await staller.closed).code).toBe(1006);

    // The reader answered every ping: still open and served, several pings later.
    await waitFor(() => pings >= 3, { timeoutMs: 60_000, what: 'three pings to the reader' });
    expect(reader.socket.readyState).toBe(reader.socket.OPEN);
    await api.gql('mutation { appendEvent(input: { runId: "kept", type: "t" }) { __typename } }');
    await reader.until((frames) => frames.some((f) => f.type === 'next' && f.seq === 1), 'the event on the reader', 30_000);
    expect(await subscriptionsOpen()).toBe(1);
    reader.close();
  }, 120_000);

  test('sockets are pinged in turns through the interval, not all at once (each still pinged)', async () => {
    const count = 30;
    const sockets = await Promise.all(Array.from({ length: count }, () => rawSocket(api.url)));
    const pings: number[][] = sockets.map(() => []);
    for (const [i, { socket }] of sockets.entries()) socket.on('ping', () => pings[i]?.push(performance.now()));
    await waitFor(() => pings.every((times) => times.length >= 3), { timeoutMs: 60_000, what: 'three pings to every socket' });
    // All at once, every socket's ping of an interval arrives within a few milliseconds of the others'.
    const all = pings.flat().sort((a, b) => a - b);
    let together = 0;
    for (let first = 0, last = 0; last < all.length; last++) {
      while ((all[last] as number) - (all[first] as number) > 20) first++;
      together = Math.max(together, last - first + 1);
    }
    expect(together).toBeLessThanOrEqual(count / 2);
    for (const { socket } of sockets) socket.close();
  }, 120_000);

  test('an event loop held longer than the interval cuts no socket that answered meanwhile', async () => {
    const sockets = await Promise.all(Array.from({ length: 20 }, () => rawSocket(api.url)));
    const closed = sockets.map(() => false);
    for (const [i, { socket }] of sockets.entries())
      socket.on('close', () => {
        closed[i] = true;
      });
    const pings = sockets.map(() => 0);
    let held = false;
    for (const [i, { socket }] of sockets.entries())
      socket.on('ping', () => {
        pings[i] = (pings[i] as number) + 1;
        if (held) return;
        held = true;
        // The server shares this thread: hold it past an interval right after a ping went out, its
        // pong written back but not read (a collection, a large synchronous task, a debugger).
        const until = performance.now() + 2_500;
        while (performance.now() < until);
      });
    await waitFor(() => held, { timeoutMs: 30_000, what: 'a ping' });
    const after = [...pings];
    await waitFor(() => closed.some(Boolean) || pings.every((n, i) => n >= (after[i] as number) + 2), {
      timeoutMs: 60_000,
      what: 'two more pings to every socket',
    });
    expect(closed.filter(Boolean)).toHaveLength(0);
    for (const { socket } of sockets) socket.close();
  }, 120_000);
});
