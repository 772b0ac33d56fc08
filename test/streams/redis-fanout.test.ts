/**
 * The Redis fan-out between two replicas, on a real redis-server of this file's own: changes
 * cross with their dates intact; sends in flight and the stream kept in Redis are bounded
 * (both bounds reached here), and a replica that could not send tells the others to re-read
 * from the table once Redis answers again. Entries are trusted only when sealed with the
 * replicas' secret: forged, altered, oversized, replayed and malformed ones are dropped and
 * counted (one log line per interval), and a sender's missing entry sends everyone to the table.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/lib/logger.ts';
import type { Change } from '../../src/streams/changes.ts';
import { decodeChange, encodeChange } from '../../src/streams/fanout/codec.ts';
import { type Entry, openEntry, SenderCounts, sealEntry } from '../../src/streams/fanout/entries.ts';
import { Heartbeats } from '../../src/streams/fanout/heartbeats.ts';
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

const SECRET = 'the-replicas-of-this-test-share-it';
const MAX_ENTRY = 64 * 1024;

function replica(prefix: string, name: string, options: { maxSendsInFlight?: number; maxLen?: number; shards?: number } = {}) {
  const got = { changes: [] as Change[], resyncs: [] as string[], warnings: [] as string[] };
  const fanout = new RedisFanout({
    url: redis.url,
    secret: SECRET,
    maxEntryBytes: MAX_ENTRY,
    shardsOwned: () => options.shards ?? 0,
    shardLeaseMs: 4_000,
    prefix,
    replicaId: name,
    onChange: (change) => got.changes.push(change),
    onResync: (reason) => got.resyncs.push(reason),
    log: { ...silentLogger, warn: (line: string) => got.warnings.push(line) },
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
      run: { id: 'r', task: 'x', status: 'RUNNING', version: 2, createdAt: new Date(1), updatedAt: new Date(2), eventShards: 1 },
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
    // Each counts the others by their sealed heartbeats (a member added to Redis by anyone else counts for nothing).
    await waitFor(async () => (await a.fanout.replicas(60_000)) === 2 && (await b.fanout.replicas(60_000)) === 2, {
      timeoutMs: 10_000,
      what: 'each to hear the other',
    });
    const direct = new Redis(redis.url);
    await direct.zadd(`${prefix}:replicas`, Date.now() + 1e9, 'a-fake-replica');
    direct.disconnect();
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

  test('entries not sealed by a replica (forged, altered, oversized, malformed, replayed) never reach a feed, are counted, and are told of in one line', async () => {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a');
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    const direct = new Redis(redis.url);
    const key = `${prefix}:changes`;
    try {
      const forged = encodeChange(event(3));
      // The old format, as anyone who can reach Redis could write it.
      await direct.xadd(key, '*', 'from', 'a', 'c', forged);
      // The new format with a seal made without the secret.
      const entry: Entry = { from: 'a', n: 1, at: Date.now(), kind: 'change', value: forged };
      await direct.xadd(key, '*', ...sealEntry('not-the-secret-of-these-replicas', key, entry));
      // A real seal, on an altered value.
      const sealed = sealEntry(SECRET, key, { ...entry, n: 2 });
      sealed[11] = encodeChange(event(4));
      await direct.xadd(key, '*', ...sealed);
      // Oversized, and an old entry replayed.
      await direct.xadd(key, '*', ...sealEntry(SECRET, key, { ...entry, n: 3, value: 'x'.repeat(MAX_ENTRY + 1) }));
      await direct.xadd(key, '*', ...sealEntry(SECRET, key, { ...entry, n: 4, at: Date.now() - 120_000 }));
      for (let i = 0; i < 40; i++) await direct.xadd(key, '*', 'garbage', String(i));
      // Then the real change from a.
      a.fanout.publish(event(1));
      await waitFor(() => b.got.changes.length === 1, { timeoutMs: 10_000, what: 'the real change' });
      expect(b.got.changes).toEqual([event(1)]);
      expect(b.fanout.dropped).toMatchObject({ malformed: 41, unauthenticated: 2, oversized: 1, stale: 1 });
      expect(b.got.warnings.filter((line) => /dropped/.test(line))).toHaveLength(1);
      expect(b.got.warnings[0]).toMatch(/^Redis: dropped \d+ (malformed|unauthenticated)/);
    } finally {
      direct.disconnect();
    }
  });

  test('a sealed entry repeated is dropped; one of a sender`s entries missing sends the receiver to the table', async () => {
    const prefix = uniqueName('fan');
    const b = replica(prefix, 'b');
    await b.fanout.start();
    const direct = new Redis(redis.url);
    const key = `${prefix}:changes`;
    try {
      const send = (n: number, seq: number) =>
        direct.xadd(key, '*', ...sealEntry(SECRET, key, { from: 'a', n, at: Date.now(), kind: 'change', value: encodeChange(event(seq)) }));
      await send(1, 1);
      await send(1, 1);
      await send(2, 2);
      await waitFor(() => b.got.changes.length === 2, { timeoutMs: 10_000, what: 'two changes' });
      expect(b.fanout.dropped.repeat).toBe(1);
      expect(b.got.resyncs).toEqual([]);
      // Entry 3 never arrives (deleted in Redis, or never sent): 4 says so.
      await send(4, 4);
      await waitFor(() => b.got.resyncs.length === 1, { timeoutMs: 10_000, what: 'the gap to be noticed' });
      expect(b.got.resyncs[0]).toMatch(/entries from replica a were lost/);
      expect(b.got.changes.map((c) => (c.kind === 'event' ? c.event.seq : 0))).toEqual([1, 2, 4]);
    } finally {
      direct.disconnect();
    }
  });

  /** Replica a publishes an event with `payload`, too large to send: it says so, and b is told to read the table. */
  async function publishedTooLarge(payload: string) {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a');
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    const small = event(1) as Extract<Change, { kind: 'event' }>;
    a.fanout.publish({ ...small, event: { ...small.event, payload } });
    expect(a.fanout.degraded).toMatch(/could not be sent/);
    await waitFor(() => b.got.resyncs.some((r) => /replica a could not send/.test(r)), { timeoutMs: 10_000, what: 'the resync' });
    return b;
  }

  test('a change too large for an entry is not sent: the others are told to read the table instead', async () => {
    const b = await publishedTooLarge('x'.repeat(MAX_ENTRY));
    expect(b.got.changes).toEqual([]);
  });

  test('an entry is measured in bytes, as the receiver measures it: one past the bound only in UTF-8 is not sent either', async () => {
    // Half the bound in characters, one and a half times it in bytes.
    const b = await publishedTooLarge('あ'.repeat(MAX_ENTRY / 2));
    expect(b.fanout.dropped.oversized ?? 0).toBe(0);
    expect(b.got.changes).toEqual([]);
  });

  test('heartbeats: a shard reader heard from keeps the others ready; a leaving one is forgotten at once', async () => {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a', { shards: 2 });
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    // What must hold is that nothing happens for longer than the bound: so this waits out the bound.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    expect(b.fanout.degraded).toBeUndefined();
    await a.fanout.stop();
    expect(b.fanout.degraded).toBeUndefined();
  });
});

describe('the seal, the counts and the beats on their own', () => {
  const SCOPE = 'runplane:t:changes';
  const rules = { secret: SECRET, scope: SCOPE, maxValueLength: 100, maxAgeMs: 60_000, now: () => 1_000_000 };
  const entry: Entry = { from: 'r1', n: 7, at: 1_000_000, kind: 'change', value: '{"kind":"event"}' };

  test('a sealed entry opens as it was; any field changed does not', () => {
    expect(openEntry(sealEntry(SECRET, SCOPE, entry), rules)).toEqual(entry);
    // Sealed for another table's stream (one secret shared by two tables): not this one's.
    expect(openEntry(sealEntry(SECRET, 'runplane:other:changes', entry), rules)).toBe('unauthenticated');
    // Bytes as XREAD gives them open alike; an oversized field is judged by its length only.
    expect(
      openEntry(
        sealEntry(SECRET, SCOPE, entry).map((field) => Buffer.from(field)),
        rules,
      ),
    ).toEqual(entry);
    for (const index of [3, 5, 7, 9, 11]) {
      const fields = sealEntry(SECRET, SCOPE, entry);
      fields[index] = index === 5 || index === 7 ? '8' : index === 9 ? 'resync' : `${fields[index]}x`;
      expect(openEntry(fields, rules)).toBe('unauthenticated');
    }
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, at: 1_000_000 - 61_000 }), rules)).toBe('stale');
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, at: 1_000_000 + 61_000 }), rules)).toBe('stale');
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, value: 'x'.repeat(101) }), rules)).toBe('oversized');
    expect(openEntry(['from', 'r1', 'c', '{}'], rules)).toBe('malformed');
    const fields = sealEntry(SECRET, SCOPE, entry);
    fields[13] = 'zz';
    expect(openEntry(fields, rules)).toBe('malformed');
  });

  test('sender counts: next, repeat, gap; a sender first seen mid-way is taken as it comes', () => {
    const counts = new SenderCounts();
    expect([
      counts.check('a', 5),
      counts.check('a', 6),
      counts.check('a', 6),
      counts.check('a', 3),
      counts.check('a', 9),
      counts.check('a', 10),
    ]).toEqual(['next', 'next', 'repeat', 'repeat', 'gap', 'next']);
    expect(counts.check('b', 1)).toBe('next');
  });

  test('heartbeats: a shard reader quiet past the bound is silent, forgotten past the lease; a replica reading no shard is never awaited', () => {
    let now = 0;
    const beats = new Heartbeats({ boundMs: 3_000, forgetMs: 7_000, now: () => now });
    beats.beat('reader', 2);
    beats.beat('idle', 0);
    now = 3_000;
    expect(beats.silent()).toEqual([]);
    now = 3_001;
    expect(beats.silent()).toEqual(['reader']);
    beats.beat('reader', 2);
    expect(beats.silent()).toEqual([]);
    now = 3_001 + 7_001;
    expect(beats.silent()).toEqual([]);
    beats.beat('leaving', 1);
    beats.beat('leaving', 0);
    now += 4_000;
    expect(beats.silent()).toEqual([]);
  });
});
