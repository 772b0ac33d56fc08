/**
 * An operation id used again once the client completed it (the protocol allows it): the new
 * operation runs under it, whatever the old one was still doing, and the old one's end does not
 * take the new one with it. An id used again without a complete still closes the socket (4409).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_HELD_MESSAGES } from '../../src/http/reused-ids.ts';
import { ownEngine } from '../support/engine.ts';
import { type RawSocket, rawSocket } from '../support/raw-ws.ts';
import { appendEvent, newRun, OPEN_TENANT, storedEventRows } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let engine: Awaited<ReturnType<typeof ownEngine>>['engine'];
let api: TestServer;
beforeAll(async () => {
  ({ engine } = await ownEngine());
  api = await startTestServer({ endpoint: engine.endpoint });
});
afterAll(async () => {
  await engine?.close();
});

const EVENTS = 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq payload } }';
const SLOW_APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }';
/**
 * Sends a slow append as operation `m`, completes it, and subscribes `m` again to `subscribeTo`'s
 * events: that subscribe waits for the append's end. Returns the engine's fault (disposable).
 */
function reuseBehindSlowAppend(raw: RawSocket, runId: string, subscribeTo: string, latencyMs: number) {
  const fault = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], latencyMs, times: 1 });
  raw.send({ id: 'm', type: 'subscribe', payload: { query: SLOW_APPEND, variables: { input: { runId, type: 'slow' } } } });
  raw.send({ id: 'm', type: 'complete' });
  raw.subscribe('m', EVENTS, { runId: subscribeTo });
  return fault;
}
const subscriptionsOpen = () => api.server.app.admission.usage(OPEN_TENANT).subscriptions;
const runOf = (message: unknown) => JSON.stringify(message).match(/"run":"(\w+)"/)?.[1];

describe('an id used again', () => {
  test('right after its complete, in the same packet, ten times over: each new subscription gets its own events', async () => {
    const runs = await Promise.all(Array.from({ length: 11 }, (_, i) => newRun(api, { events: [{ run: `r${i}` }, { run: `r${i}` }] })));
    const raw = await rawSocket(api.url);
    raw.subscribe('x', EVENTS, { runId: runs[0] });
    await raw.until((frames) => frames.filter((f) => f.type === 'next').length >= 2, 'the first run’s events');
    for (let i = 1; i < runs.length; i++) {
      // One write: graphql-ws sees the subscribe while it is still ending the old operation.
      raw.socket.send(JSON.stringify({ id: 'x', type: 'complete' }));
      raw.subscribe('x', EVENTS, { runId: runs[i] });
      await raw.until(
        (frames) => frames.filter((f) => f.type === 'next' && runOf(f.message) === `r${i}`).length >= 2,
        `run ${i}’s events under the reused id`,
      );
    }
    // The last one is live: an event appended now reaches it.
    await appendEvent(api, runs[10] as string, { payload: { run: 'r10' } });
    await raw.until((frames) => frames.filter((f) => f.type === 'next' && runOf(f.message) === 'r10').length >= 3, 'the live event');
    // The server never completed an operation the client had just started.
    expect(raw.frames.filter((f) => f.type === 'complete' && f.id === 'x')).toEqual([]);
    expect(raw.socket.readyState).toBe(raw.socket.OPEN);
    raw.close();
  });

  test('while the old operation is a mutation still running: the new one waits for its end, then runs', async () => {
    const runId = await newRun(api);
    const raw = await rawSocket(api.url);
    using _ = reuseBehindSlowAppend(raw, runId, runId, 1500);
    await raw.until(
      (frames) => frames.some((f) => f.type === 'next' && f.id === 'm' && f.seq === 1),
      'the slow append, through the new subscription',
    );
    // The completed mutation's answer is not sent under the id now used by the subscription.
    expect(raw.frames.filter((f) => f.type === 'next' && JSON.stringify(f.message).includes('appendEvent'))).toEqual([]);
    expect(raw.frames.filter((f) => f.type === 'complete')).toEqual([]);
    raw.close();
  });

  test('without a complete first, closes the socket with 4409', async () => {
    const runId = await newRun(api);
    const raw = await rawSocket(api.url);
    raw.subscribe('x', EVENTS, { runId });
    raw.subscribe('x', EVENTS, { runId });
    expect((await raw.closed).code).toBe(4409);
  });

  test(`a client flooding one id's messages while it ends is cut past ${MAX_HELD_MESSAGES}, and what waited takes no place`, async () => {
    const [runId, idle] = await Promise.all([newRun(api), newRun(api)]);
    const raw = await rawSocket(api.url);
    using _ = reuseBehindSlowAppend(raw, runId, idle, 3000);
    for (let i = 0; i <= MAX_HELD_MESSAGES; i++) raw.send({ id: 'm', type: 'complete' });
    expect((await raw.closed).code).toBe(1006);
    // Once the slow append is over, the subscribe that waited is dropped with the socket, not admitted.
    await waitFor(async () => (await storedEventRows(api, runId)).length === 1, { what: 'the slow append written', timeoutMs: 60_000 });
    await waitFor(() => subscriptionsOpen() === 0, { what: 'no subscription left open' });
  });

  test('what one id holds is bounded in bytes too', async () => {
    const runId = await newRun(api);
    const raw = await rawSocket(api.url);
    using _ = reuseBehindSlowAppend(raw, runId, runId, 3000);
    // Three messages of 0.45 MiB each pass the body limit (1 MiB) together: the third cuts the socket.
    for (let i = 0; i < 3; i++) raw.send({ id: 'm', type: 'complete', pad: 'x'.repeat(470_000) });
    expect((await raw.closed).code).toBe(1006);
  });

  test('a client closing while a reused id waits leaves no place taken once the old operation ends', async () => {
    const [runId, idle] = await Promise.all([newRun(api), newRun(api)]);
    const raw = await rawSocket(api.url);
    using _ = reuseBehindSlowAppend(raw, runId, idle, 1500);
    await waitFor(() => subscriptionsOpen() === 0, { what: 'the old append, not a subscription' });
    raw.close();
    await raw.closed;
    await waitFor(async () => (await storedEventRows(api, runId)).length === 1, { what: 'the slow append written', timeoutMs: 60_000 });
    await waitFor(() => subscriptionsOpen() === 0, { what: 'no subscription left open' });
  });

  test('every id completed and subscribed again in one burst: the socket stays, each subscription runs', async () => {
    const runs = await Promise.all(Array.from({ length: 15 }, () => newRun(api)));
    const raw = await rawSocket(api.url);
    for (const [i, runId] of runs.entries()) raw.subscribe(`s${i}`, EVENTS, { runId });
    await waitFor(() => subscriptionsOpen() === runs.length, { what: 'all subscribed' });
    runs.forEach((runId, i) => {
      raw.send({ id: `s${i}`, type: 'complete' });
      raw.subscribe(`s${i}`, EVENTS, { runId });
    });
    await waitFor(() => subscriptionsOpen() === runs.length, { what: 'all subscribed again' });
    await Promise.all(runs.map((runId) => appendEvent(api, runId, { payload: { run: 'again' } })));
    await raw.until((frames) => runs.every((_, i) => frames.some((f) => f.type === 'next' && f.id === `s${i}`)), 'an event at every id');
    expect(raw.socket.readyState).toBe(raw.socket.OPEN);
    expect(raw.frames.filter((f) => f.type === 'complete' || f.type === 'error')).toEqual([]);
    raw.close();
  });

  test('runsChanged and leasesChanged give their place back on complete, with nothing changing in the tenant', async () => {
    const quiet = await startTestServer({ endpoint: engine.endpoint });
    const open = () => quiet.server.app.admission.usage(OPEN_TENANT).subscriptions;
    const raw = await rawSocket(quiet.url);
    raw.send({ id: 'r', type: 'subscribe', payload: { query: 'subscription { runsChanged { id } }' } });
    raw.send({ id: 'l', type: 'subscribe', payload: { query: 'subscription { leasesChanged { unitId } }' } });
    await waitFor(() => open() === 2, { what: 'both subscribed' });
    raw.send({ id: 'r', type: 'complete' });
    raw.send({ id: 'l', type: 'complete' });
    await waitFor(() => open() === 0, { what: 'both places given back' });
    // And the id is free again at once.
    raw.send({ id: 'r', type: 'subscribe', payload: { query: 'subscription { runsChanged { id } }' } });
    await waitFor(() => open() === 1, { what: 'subscribed again' });
    raw.close();
  });
});
