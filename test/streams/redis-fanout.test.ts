/**
 * The Redis fan-out between two replicas, on a real redis-server of this file's own: changes
 * cross with their dates intact; sends in flight and the stream kept in Redis are bounded
 * (both bounds reached here), and a replica that could not send tells the others to re-read
 * from the table once Redis answers again.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/lib/logger.ts';
import type { Change } from '../../src/streams/changes.ts';
import { decodeChange, encodeChange } from '../../src/streams/fanout/codec.ts';
import { RedisFanout } from '../../src/streams/fanout/redis.ts';
import { uniqueName } from '../support/aws.ts';
import { noRedis, startRedis, type TestRedis } from '../support/redis.ts';
import { waitFor } from '../support/wait.ts';

let redis: TestRedis;
const leftovers: RedisFanout[] = [];
beforeAll(async () => {
  if (!noRedis) redis = await startRedis();
});
afterAll(async () => redis?.kill());
afterEach(async () => {
  for (const fanout of leftovers.splice(0)) await fanout.stop();
});

const event = (seq: number): Change => ({
  kind: 'event',
  tenant: 'default',
  runId: 'r1',
  event: { runId: 'r1', seq, type: 'step', payload: { n: seq }, createdAt: new Date(1_700_000_000_000 + seq) },
});

function replica(prefix: string, name: string, options: { maxSendsInFlight?: number; maxLen?: number } = {}) {
  const got = { changes: [] as Change[], resyncs: [] as string[] };
  const fanout = new RedisFanout({
    url: redis.url,
    prefix,
    replicaId: name,
    onChange: (change) => got.changes.push(change),
    onResync: (reason) => got.resyncs.push(reason),
    log: silentLogger,
    ...options,
  });
  leftovers.push(fanout);
  return { fanout, got };
}

test('a change survives the trip as it was, dates included; a foreign entry is refused with a reason', () => {
  const changes: Change[] = [
    event(7),
    {
      kind: 'run',
      tenant: 't',
      runId: 'r',
      run: { id: 'r', task: 'x', status: 'RUNNING', version: 2, createdAt: new Date(1), updatedAt: new Date(2) },
    },
    { kind: 'budget', tenant: 't', runId: 'r', budget: { runId: 'r', cap: 5, spent: 1, remaining: 4, version: 1 } },
    {
      kind: 'lease',
      tenant: 't',
      unitId: 'u',
      lease: { unitId: 'u', owner: 'o', token: 3, acquiredAt: new Date(3), expiresAt: new Date(4), version: 1 },
    },
  ];
  for (const change of changes) expect(decodeChange(encodeChange(change))).toEqual(change);
  expect(() => decodeChange('{"kind":"nope"}')).toThrow('not a change');
  expect(() => decodeChange('{"kind":"event","tenant":"t","event":{"createdAt":"soon"}}')).toThrow('createdAt is not a date');
});

describe.skipIf(noRedis)('over Redis', () => {
  test("each replica gets the other's changes in order, and not its own", async () => {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a');
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    for (let seq = 1; seq <= 20; seq++) a.fanout.publish(event(seq));
    b.fanout.publish(event(100));
    await waitFor(() => b.got.changes.length === 20 && a.got.changes.length === 1, { timeoutMs: 10_000, what: 'both sides' });
    expect(b.got.changes.map((c) => (c.kind === 'event' ? c.event.seq : 0))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(a.got.changes).toEqual([event(100)]);
    // Each counts itself alive when it asks.
    expect(await b.fanout.replicas(60_000)).toBe(1);
    expect(await a.fanout.replicas(60_000)).toBe(2);
  });

  test('sends in flight stop at their bound while Redis does not answer; the others are told to re-read once it does', async () => {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a', { maxSendsInFlight: 50 });
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    redis.pause();
    try {
      for (let seq = 1; seq <= 200; seq++) a.fanout.publish(event(seq));
      expect(a.fanout.sendsInFlight).toBe(50);
      expect(a.fanout.counts.unsent).toBe(150);
      expect(a.fanout.degraded).toMatch(/could not be sent/);
    } finally {
      redis.resume();
    }
    await waitFor(() => b.got.resyncs.some((r) => /replica a could not send/.test(r)), {
      timeoutMs: 30_000,
      what: "b to be told to re-read a's changes",
    });
    expect(b.got.changes.map((c) => (c.kind === 'event' ? c.event.seq : 0))).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    await waitFor(() => a.fanout.degraded === undefined, { timeoutMs: 10_000, what: 'a to be whole again' });
  });

  test('the stream kept in Redis stops at its length', async () => {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a', { maxLen: 1_000, maxSendsInFlight: 10_000 });
    await a.fanout.start();
    for (let seq = 1; seq <= 5_000; seq++) a.fanout.publish(event(seq));
    await waitFor(() => a.fanout.counts.published === 5_000, { timeoutMs: 30_000, what: 'every send' });
    const direct = new Redis(redis.url);
    try {
      const length = await direct.xlen(`${prefix}:changes`);
      // Trimmed by whole nodes of up to 100 entries (MAXLEN ~).
      expect(length).toBeGreaterThanOrEqual(1_000);
      expect(length).toBeLessThan(1_100);
    } finally {
      direct.disconnect();
    }
  });
});
