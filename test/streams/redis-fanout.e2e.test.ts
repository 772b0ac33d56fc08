/**
 * The Redis fan-out between two replicas, on a real redis-server of this file's own (its parts
 * without Redis: fanout-entries.test.ts): each gets the other's changes in order; sends in flight and the stream kept in Redis are bounded, in
 * entries and in bytes (the bounds reached here), and a replica that could not send tells the
 * others to re-read from the table once Redis answers again. A change larger than an entry, or
 * past its tenant's share, crosses as a notice (another tenant's go whole). Entries are trusted
 * only when sealed with the replicas' secret: forged, altered, oversized, replayed and malformed
 * ones are dropped and counted (one log line per interval), and a sender's missing entry sends
 * everyone to the table.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { silentLogger } from '../../src/lib/logger.ts';
import type { Change } from '../../src/streams/changes.ts';
import { streamBound } from '../../src/streams/fanout/bounds.ts';
import { encodeChange } from '../../src/streams/fanout/codec.ts';
import { type Entry, sealEntry } from '../../src/streams/fanout/entries.ts';
import type { Notice } from '../../src/streams/fanout/notices.ts';
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

type ReplicaSettings = { maxSendsInFlight?: number; maxLen?: number; shards?: number; entryBytes?: number; tenantBytesPerSecond?: number };

function replica(prefix: string, name: string, options: ReplicaSettings = {}) {
  const got = { changes: [] as Change[], notices: [] as Notice[], resyncs: [] as string[], warnings: [] as string[] };
  const fanout = new RedisFanout({
    url: redis.url,
    secret: SECRET,
    entryBytes: MAX_ENTRY,
    maxEntryBytes: MAX_ENTRY,
    tenantBytesPerSecond: 1024 * 1024 * 1024,
    shardsOwned: () => options.shards ?? 0,
    shardLeaseMs: 4_000,
    prefix,
    replicaId: name,
    onChange: (change) => got.changes.push(change),
    onNotice: (notice) => got.notices.push(notice),
    onResync: (reason) => got.resyncs.push(reason),
    log: { ...silentLogger, warn: (line: string) => got.warnings.push(line) },
    ...options,
  });
  leftovers.push(fanout);
  return { fanout, got };
}

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

  test('the stream kept in Redis stays within its bound in bytes, whatever the size of the changes', async () => {
    const prefix = uniqueName('fan');
    const entryBytes = 8 * 1024;
    const a = replica(prefix, 'a', { maxLen: 1_000, maxSendsInFlight: 10_000, entryBytes });
    await a.fanout.start();
    const direct = new Redis(redis.url);
    const used = async () => Number(/used_memory:(\d+)/.exec(await direct.info('memory'))?.[1]);
    try {
      const before = await used();
      /** An event whose change is `bytes` long as an entry's value. */
      const sized = (seq: number, bytes: number): Change => {
        const change = event(seq) as Extract<Change, { kind: 'event' }>;
        const empty = { ...change, event: { ...change.event, payload: '' } };
        return { ...change, event: { ...change.event, payload: 'p'.repeat(bytes - Buffer.byteLength(encodeChange(empty))) } };
      };
      expect(Buffer.byteLength(encodeChange(sized(1_000, entryBytes)))).toBe(entryBytes);
      // As large as an entry may be, and every third four times larger (those go as notices).
      for (let seq = 1_000; seq < 4_000; seq++) a.fanout.publish(sized(seq, seq % 3 ? entryBytes : 4 * entryBytes));
      await waitFor(() => a.fanout.counts.published === 3_000, { timeoutMs: 30_000, what: 'every send' });
      expect(a.fanout.notices.samples()).toEqual([['default', 'size', 1_000]]);
      expect((await used()) - before).toBeLessThanOrEqual(streamBound(1_000, entryBytes));
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

  /** Replica a publishes an event with `payload`, too large for an entry: it crosses as a notice, and a is not degraded. */
  async function publishedTooLarge(payload: string) {
    const prefix = uniqueName('fan');
    const a = replica(prefix, 'a');
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    const small = event(1) as Extract<Change, { kind: 'event' }>;
    a.fanout.publish({ ...small, event: { ...small.event, payload } });
    await waitFor(() => b.got.notices.length === 1, { timeoutMs: 10_000, what: 'the notice' });
    expect(b.got.notices).toEqual([{ kind: 'event', tenant: 'default', id: 'r1' }]);
    expect(a.fanout.notices.samples()).toEqual([['default', 'size', 1]]);
    expect(a.fanout.degraded).toBeUndefined();
    expect([b.got.resyncs, b.got.changes]).toEqual([[], []]);
    return b;
  }

  test('a change too large for an entry crosses as a notice: the others read it from the table, nobody resyncs', async () => {
    await publishedTooLarge('x'.repeat(MAX_ENTRY));
  });

  test('an entry is measured in bytes, as the receiver measures it: one past the bound only in UTF-8 crosses as a notice too', async () => {
    // Half the bound in characters, one and a half times it in bytes.
    const b = await publishedTooLarge('あ'.repeat(MAX_ENTRY / 2));
    expect(b.fanout.dropped.oversized ?? 0).toBe(0);
  });

  test("past its share a tenant's changes cross as notices, one per thing and turn; another tenant's cross whole", async () => {
    const prefix = uniqueName('fan');
    // A share of 8 KiB a second: a burst of 16 KiB, about nine of these 1 KB events.
    const a = replica(prefix, 'a', { entryBytes: 2048, tenantBytesPerSecond: 8 * 1024 });
    const b = replica(prefix, 'b');
    await Promise.all([a.fanout.start(), b.fanout.start()]);
    const sized = (tenant: string, runId: string, seq: number): Change => ({
      kind: 'event',
      tenant,
      runId,
      event: { runId, seq, type: 'step', payload: 'p'.repeat(1000), createdAt: new Date(1_700_000_000_000 + seq) },
    });
    for (let seq = 1; seq <= 40; seq++) a.fanout.publish(sized('noisy', 'r1', seq));
    for (let seq = 1; seq <= 5; seq++) a.fanout.publish(sized('quiet', 'r2', seq));
    await waitFor(() => b.got.changes.filter((c) => c.tenant === 'quiet').length === 5, { timeoutMs: 10_000, what: "the quiet tenant's" });
    const noisy = b.got.changes.filter((c) => c.tenant === 'noisy').length;
    expect(noisy).toBeGreaterThanOrEqual(5);
    expect(noisy).toBeLessThan(15);
    expect(b.got.notices).toEqual([{ kind: 'event', tenant: 'noisy', id: 'r1' }]);
    expect(a.fanout.notices.samples()).toEqual([['noisy', 'share', 40 - noisy]]);
    expect([a.fanout.degraded, b.got.resyncs]).toEqual([undefined, []]);
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
