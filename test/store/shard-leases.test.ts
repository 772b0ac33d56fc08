/**
 * Stream shard leases: one holder at a time, the checkpoint kept in the lease row and moved
 * only by its live holder with its token. A holder that stalled past its lease (whether or not
 * another took over meanwhile) can neither move the checkpoint nor call the shard drained.
 */
import { describe, expect, test } from 'vitest';
import { createShardLeases } from '../../src/store/leases/shards.ts';
import { ThrottleCounts } from '../../src/store/throttles.ts';
import { uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { storesOnFreshTable } from './fixture.ts';

const { clients, table, clock } = await storesOnFreshTable();
const leases = createShardLeases({
  doc: clients.doc,
  tableName: table,
  now: () => new Date(clock.now()),
  retention: { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400 },
});
/** The lease a write returned (the test fails here if it was refused). */
function must<T>(value: T | null | undefined): T {
  if (value === null || value === undefined) throw new Error('expected a lease, the write was refused');
  return value;
}
const shard = () => `shardId-${uniqueName('s')}-0000000000001`;

test('a stale holder cannot move the checkpoint, before or after another takes over', async () => {
  const id = shard();
  const a = await leases.acquire(id, 'a', 10, null);
  expect(a).not.toBeNull();
  const renewed = await leases.hold({ lease: must(a), checkpoint: '000000000000000000100', ttlSeconds: 10 });
  expect(renewed?.checkpoint).toBe('000000000000000000100');

  clock.advance(10_001);
  // Stalled past its lease: refused even though nobody holds the shard yet.
  expect(await leases.hold({ lease: must(renewed), checkpoint: '000000000000000000200', ttlSeconds: 10 })).toBeNull();
  expect(await leases.hold({ lease: must(renewed), checkpoint: '000000000000000000200', ttlSeconds: 0, drained: true })).toBeNull();

  const b = await leases.acquire(id, 'b', 10, await leases.read(id));
  expect(b?.token).toBeGreaterThan(must(a).token);
  // B resumes where A last checkpointed.
  expect(b?.checkpoint).toBe('000000000000000000100');

  // A wakes: its token is old.
  expect(await leases.hold({ lease: must(renewed), checkpoint: '000000000000000000300', ttlSeconds: 10 })).toBeNull();
  const row = await leases.read(id);
  expect(row).toMatchObject({ owner: 'b', token: must(b).token, checkpoint: '000000000000000000100', drained: false });
});

test('one holder at a time; a hand-back frees the shard at once, with its checkpoint', async () => {
  const id = shard();
  const b = await leases.acquire(id, 'b', 10, null);
  expect(await leases.acquire(id, 'c', 10, await leases.read(id))).toBeNull();
  await leases.hold({ lease: must(b), checkpoint: '000000000000000000150', ttlSeconds: 0 });
  const c = await leases.acquire(id, 'c', 10, await leases.read(id));
  expect(c).toMatchObject({ owner: 'c', checkpoint: '000000000000000000150' });
  expect(must(c).token).toBeGreaterThan(must(b).token);
});

test('drained is said by the holder only, and stays', async () => {
  const id = shard();
  const a = await leases.acquire(id, 'a', 10, null);
  const done = await leases.hold({ lease: must(a), checkpoint: '000000000000000000900', ttlSeconds: 0, drained: true });
  expect(done).toMatchObject({ drained: true, checkpoint: '000000000000000000900' });
  const b = await leases.acquire(id, 'b', 10, await leases.read(id));
  expect(b?.drained).toBe(true);
});

describe.skipIf(onlyEmbedded)('throttled', () => {
  test('a checkpoint throttled three times is written on the fourth try, each throttle counted under checkpoint', async () => {
    const { engine } = await ownEngine();
    try {
      const throttles = new ThrottleCounts();
      const own = await storesOnFreshTable({ endpoint: engine.endpoint, maxAttempts: 1 });
      const held = createShardLeases({
        doc: own.clients.doc,
        tableName: own.table,
        now: () => new Date(own.clock.now()),
        retention: { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400 },
        throttles,
        throttleRetry: { attempts: 10, backoff: { firstMs: 1, maxMs: 5 } },
      });
      const id = shard();
      const lease = must(await held.acquire(id, 'a', 10, null));
      using _ = engine.faults.inject({ operations: ['UpdateItem'], error: 'ProvisionedThroughputExceededException', times: 3 });
      const kept = await held.hold({ lease, checkpoint: '000000000000000000042', ttlSeconds: 10 });
      expect(kept?.checkpoint).toBe('000000000000000000042');
      expect(throttles.throttled).toEqual({ checkpoint: 3 });
      expect(throttles.refused).toEqual({});
    } finally {
      await engine.close();
    }
  });
});
