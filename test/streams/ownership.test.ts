/**
 * Shard ownership among replicas on real lease rows (the test run's engine), with the replica
 * count and the clock in the test's hands: a replica alone takes every shard; one that joins
 * gets its share as the first hands shards back, one a round; a hand-back carries the
 * checkpoint; a holder whose renewals stop lets go before its lease ends; a child waits for its
 * parent.
 */
import { expect, test } from 'vitest';
import { silentLogger } from '../../src/lib/logger.ts';
import { createShardLeases } from '../../src/store/leases/shards.ts';
import { ShardOwnership } from '../../src/streams/ownership.ts';
import type { ShardReader } from '../../src/streams/shards.ts';
import { storesOnFreshTable } from '../store/fixture.ts';
import { uniqueName } from '../support/aws.ts';

const { clients, table, clock } = await storesOnFreshTable();
const leases = createShardLeases({
  doc: clients.doc,
  tableName: table,
  now: () => new Date(clock.now()),
  retention: { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400 },
});

const reader = (parentId?: string): ShardReader => ({
  id: `shardId-${uniqueName('s')}-00000000001`,
  calls: 0,
  lastQuietCall: 0,
  lastCall: 0,
  failures: 0,
  closed: false,
  parentId,
  state: 'reading',
  start: 'LATEST',
});

function replica(name: string, count: { replicas: number | undefined }) {
  return new ShardOwnership({
    leases,
    replicaId: name,
    ttlSeconds: 9,
    replicas: async () => count.replicas,
    log: silentLogger,
    now: () => clock.now(),
  });
}

test('a replica alone takes every shard; one that joins gets its share as the first hands shards back', async () => {
  const count = { replicas: 1 as number | undefined };
  const shards = [reader(), reader(), reader(), reader()];
  const a = replica('a', count);
  await a.round(4);
  for (const shard of shards) expect(await a.take(shard, 4)).toBe(true);
  expect(a.owned).toHaveLength(4);

  count.replicas = 2;
  const b = replica('b', count);
  await b.round(4);
  // Nothing free yet: a holds all four.
  for (const shard of shards) expect(await b.take({ ...shard }, 4)).toBe(false);
  for (let round = 0; round < 4 && b.owned.length < 2; round++) {
    await a.round(4);
    for (const shard of shards) await b.take({ ...shard }, 4);
  }
  expect(a.owned).toHaveLength(2);
  expect(b.owned).toHaveLength(2);
  expect(new Set([...a.owned, ...b.owned]).size).toBe(4);
});

test('a hand-back carries the checkpoint to the next holder', async () => {
  const count = { replicas: 1 as number | undefined };
  const shard = reader();
  const a = replica('a', count);
  await a.round(1);
  expect(await a.take(shard, 1)).toBe(true);
  shard.lastSeq = '000000000000000000042';
  await a.handBackAll();
  const next = { ...shard, lastSeq: undefined };
  const b = replica('b', count);
  await b.round(1);
  expect(await b.take(next, 1)).toBe(true);
  expect(next.lastSeq).toBe('000000000000000000042');
});

test('a holder not renewed stops reading a quarter of its lease before the end, and a renewal refused loses the shard', async () => {
  const count = { replicas: 1 as number | undefined };
  const shard = reader();
  const a = replica('a', count);
  await a.round(1);
  expect(await a.take(shard, 1)).toBe(true);
  expect(a.holds(shard.id)).toBe(true);
  clock.advance(6_800);
  expect(a.holds(shard.id)).toBe(false);
  clock.advance(2_300);
  // Past its lease: another takes it, and the stale holder's renewal is refused.
  const b = replica('b', count);
  await b.round(1);
  expect(await b.take({ ...shard }, 1)).toBe(true);
  await a.round(1);
  expect(a.owned).toEqual([]);
  expect(a.counts.lost).toBe(1);
});

test('a child waits while its parent is not drained, then reads from the start of the child', async () => {
  const count = { replicas: 1 as number | undefined };
  const parent = reader();
  const child = reader(parent.id);
  const a = replica('a', count);
  await a.round(2);
  expect(await a.take(parent, 2)).toBe(true);
  expect(await a.take(child, 2, parent)).toBe(false);
  parent.lastSeq = '000000000000000000007';
  parent.state = 'drained';
  await a.drained(parent);
  expect(await a.take(child, 2, parent)).toBe(true);
  expect(child.start).toBe('TRIM_HORIZON');
  // Another replica learns from the parent's row that it was drained.
  const seenElsewhere = { ...parent, state: 'reading' as const };
  expect(await replica('b', count).take(seenElsewhere, 2)).toBe(false);
  expect(seenElsewhere.state).toBe('drained');
});
