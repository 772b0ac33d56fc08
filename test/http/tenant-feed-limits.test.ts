/**
 * The hardening of subscriptions holds for the tenant-wide ones too: authentication first,
 * caps per connection and per tenant, the cost limit, and a bounded queue per subscriber.
 */
import { describe, expect, test } from 'vitest';
import { remember } from '../../packages/client/src/tenant-streams.ts';
import { ChangesLost, FellBehind } from '../../src/domain/errors.ts';
import type { Lease } from '../../src/domain/run.ts';
import { Hub } from '../../src/streams/hub.ts';
import { leasesFeed } from '../../src/streams/tenant-feeds.ts';
import { errorsOf, rawSocket } from '../support/raw-ws.ts';
import { startTestServer } from '../support/server.ts';
import { subscribeSse } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const RUNS_CHANGED = 'subscription { runsChanged { id status } }';
const LEASES_CHANGED = 'subscription { leasesChanged { unitId } }';
const KEY = 'console-key-0123456789abcdef';

describe('runsChanged and leasesChanged under the caps', () => {
  test('per connection: the third is refused naming the limit', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION: '2' });
    const socket = await rawSocket(api.url);
    socket.subscribe('a', RUNS_CHANGED);
    socket.subscribe('b', LEASES_CHANGED);
    socket.subscribe('c', RUNS_CHANGED);
    await socket.until((frames) => errorsOf(frames, 'c') !== undefined, 'the third subscribe to be refused');
    expect(errorsOf(socket.frames, 'c')?.[0]?.message).toMatch(/limit 2, RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION/);
    expect([errorsOf(socket.frames, 'a'), errorsOf(socket.frames, 'b')]).toEqual([undefined, undefined]);
    socket.close();
  });

  test('per tenant, across WebSocket and SSE', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: '2' });
    const socket = await rawSocket(api.url);
    socket.subscribe('a', RUNS_CHANGED);
    const sse = subscribeSse(api.url, LEASES_CHANGED, {}, 'leasesChanged');
    await waitFor(() => api.server.app.admission.usage('default').subscriptions >= 2, { what: 'two subscriptions' });
    socket.subscribe('b', LEASES_CHANGED);
    await socket.until((frames) => errorsOf(frames, 'b') !== undefined, 'the third to be refused');
    expect(errorsOf(socket.frames, 'b')?.[0]?.message).toMatch(/limit 2, RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT/);
    await expect(subscribeSse(api.url, RUNS_CHANGED, {}, 'runsChanged').until(1)).rejects.toThrow(/HTTP 429.*PER_TENANT/);
    sse.stop();
    socket.close();
  });

  test('authentication comes first: without a key neither transport gets to subscribe', async () => {
    const api = await startTestServer({ RUNPLANE_API_KEYS: `${KEY}=acme` });
    await expect(subscribeSse(api.url, RUNS_CHANGED, {}, 'runsChanged').until(1)).rejects.toThrow(/HTTP 401/);
    const socket = await rawSocket(api.url, { init: false });
    socket.send({ type: 'connection_init' });
    expect((await socket.closed).code).toBe(4403);
    expect(api.server.live.openSubscriptions).toBe(0);
    const allowed = subscribeSse(api.url, RUNS_CHANGED, {}, 'runsChanged', { key: KEY });
    await waitFor(() => api.server.live.openSubscriptions === 1, { what: 'the keyed subscription' });
    allowed.stop();
  });

  test('the cost limit counts what each change would select', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_QUERY_COST: '1000' });
    const socket = await rawSocket(api.url);
    socket.subscribe('cheap', 'subscription { runsChanged { id status budget { spent } } }');
    socket.subscribe('x', 'subscription { runsChanged { id events(first: 500) { edges { node { payload } } } } }');
    await socket.until((frames) => errorsOf(frames, 'x') !== undefined, 'the costly subscribe to be refused');
    expect(errorsOf(socket.frames, 'x')?.[0]).toMatchObject({
      message: expect.stringMatching(/cost/i),
      extensions: { code: 'COST_LIMIT' },
    });
    expect(errorsOf(socket.frames, 'cheap')).toBeUndefined();
    socket.close();
  });
});

describe("a tenant-wide subscriber's queue", () => {
  const lease = (unitId: string, version: number): Lease => ({
    unitId,
    owner: 'w',
    token: version,
    acquiredAt: new Date(0),
    expiresAt: new Date(0),
    version,
  });
  const publish = (hub: Hub, unitId: string, version: number) =>
    hub.publish({ kind: 'lease', tenant: 't', unitId, lease: lease(unitId, version) });

  test('holds one change per unit however often it changes, newest version only, each sent once', async () => {
    const hub = new Hub(() => undefined);
    const feed = leasesFeed({ hub, maxWaiting: 3 }, { tenant: 't' });
    const first = feed.next();
    for (let version = 1; version <= 500; version++) publish(hub, 'u1', version);
    publish(hub, 'u2', 1);
    expect((await first).value).toMatchObject({ unitId: 'u1', version: 500 });
    expect((await feed.next()).value).toMatchObject({ unitId: 'u2', version: 1 });
    // The stream's late copies of what was sent are dropped.
    publish(hub, 'u1', 500);
    publish(hub, 'u2', 1);
    publish(hub, 'u1', 501);
    expect((await feed.next()).value).toMatchObject({ unitId: 'u1', version: 501 });
    await feed.return(undefined);
    expect(hub.subscriberCount).toBe(0);
  });

  test('past its bound, a subscriber that is not reading gets FellBehind (LIMIT_EXCEEDED) and nothing more is held', async () => {
    const hub = new Hub(() => undefined);
    const feed = leasesFeed({ hub, maxWaiting: 3 }, { tenant: 't' });
    const started = feed.next();
    publish(hub, 'u0', 1);
    await started;
    for (let unit = 1; unit <= 4; unit++) publish(hub, `u${unit}`, 1);
    await expect(
      (async () => {
        for (;;) await feed.next();
      })(),
    ).rejects.toBeInstanceOf(FellBehind);
    expect(hub.subscriberCount).toBe(0);
  });

  test('when the stream may have lost changes, the subscriber is told to list again (ChangesLost, retryable UNAVAILABLE)', async () => {
    const hub = new Hub(() => undefined);
    const feed = leasesFeed({ hub }, { tenant: 't' });
    const next = feed.next();
    await Promise.resolve();
    hub.resync();
    await expect(next).rejects.toBeInstanceOf(ChangesLost);
    expect(hub.subscriberCount).toBe(0);
  });
});

test("the client's versions remembered per run are bounded: past the bound the one remembered longest ago goes", () => {
  const seen = new Map<string, number>();
  for (const [key, version] of [
    ['a', 1],
    ['b', 1],
    ['a', 2],
    ['c', 1],
    ['d', 1],
  ] as const)
    remember(seen, key, version, 3);
  expect([...seen]).toEqual([
    ['a', 2],
    ['c', 1],
    ['d', 1],
  ]);
});
