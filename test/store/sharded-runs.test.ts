/**
 * Runs of several event shards at the store: racing writers without group commit still get
 * each seq once, a finished run's events expire from every shard, and under the engine's
 * throughput model eight shards take far more than one.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from 'vitest';
import { InvalidInput } from '../../src/domain/errors.ts';
import { isThrottle } from '../../src/table/failures.ts';
import { keys } from '../../src/table/keys.ts';
import { manualClock, onlyEmbedded, ownEngine } from '../support/engine.ts';
import { waitFor } from '../support/wait.ts';
import { newStoredRun, storesOnFreshTable, TENANT } from './fixture.ts';

const range = (n: number, from = 1) => Array.from({ length: n }, (_, i) => i + from);

/** Rows in each partition of the run (its own first, then its shards'), straight from the table. */
async function rowsByPartition(fixture: Awaited<ReturnType<typeof storesOnFreshTable>>, runId: string, shards: number) {
  return Promise.all(
    [keys.runPartition(TENANT, runId), ...keys.eventPartitions(TENANT, runId, shards)].map(async (pk) => {
      const { Items = [] } = await fixture.clients.doc.send(
        new QueryCommand({
          TableName: fixture.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': pk },
          ConsistentRead: true,
        }),
      );
      return Items.length;
    }),
  );
}

test('a shard count outside 1..16 is refused before anything is written', async () => {
  const { stores } = await storesOnFreshTable();
  for (const eventShards of [0, 17, 2.5]) {
    await expect(
      stores.runs.create({ tenant: TENANT, id: `r${eventShards}`.replace('.', '-'), task: 't', budgetCap: 1, eventShards }),
    ).rejects.toBeInstanceOf(InvalidInput);
    expect(await stores.runs.read(TENANT, `r${eventShards}`.replace('.', '-'), { eventLimit: 1, consistent: true })).toBeNull();
  }
});

test('without group commit, 20 racing appends to a 5-shard run get seqs 1..20 once each: a seq has one home', async () => {
  const { stores } = await storesOnFreshTable({ groupCommit: false });
  const runId = await newStoredRun(stores, 1000, 5);
  const events = await Promise.all(range(20).map((i) => stores.events.append({ tenant: TENANT, runId, type: 'step', payload: { i } })));
  expect(events.map((e) => e.seq).sort((a, b) => a - b)).toEqual(range(20));
  const page = await stores.events.page({ tenant: TENANT, runId, limit: 100, consistent: true });
  expect(page.events.map((e) => e.seq)).toEqual(range(20));
  expect(new Set(page.events.map((e) => (e.payload as { i: number }).i)).size).toBe(20);
});

describe.skipIf(onlyEmbedded)('with an engine of its own', () => {
  test("a finished run's events are given its TTL in every shard, and the engine's sweeper deletes them all", async () => {
    const { engine } = await ownEngine();
    try {
      const fixture = await storesOnFreshTable({ endpoint: engine.endpoint, retention: { finishedRunSeconds: 0 } });
      const { stores } = fixture;
      // The stores' clock is the test's; the sweeper's is real time: they start together.
      fixture.clock.advance(Date.now() - fixture.clock.now());
      const runId = await newStoredRun(stores, 1000, 4);
      await Promise.all(range(12).map(() => stores.events.append({ tenant: TENANT, runId, type: 'step', payload: null })));
      expect(await rowsByPartition(fixture, runId, 4)).toEqual([2, 3, 3, 3, 3]);
      await stores.runs.transition({ tenant: TENANT, runId, from: 'RUNNING', to: 'COMPLETED' }).catch(() => undefined);
      await stores.runs.settled();
      await waitFor(
        async () => (await engine.control.sweepTtl()) >= 0 && (await rowsByPartition(fixture, runId, 4)).every((n) => n === 0),
        {
          intervalMs: 200,
          what: 'every row of the run deleted',
        },
      );
    } finally {
      await engine.close();
    }
  });

  test('the throughput model on (50 units a partition, clock stopped): an 8-shard run takes over 4 times what a 1-shard run takes', async () => {
    const clock = manualClock();
    const { engine } = await ownEngine({ now: clock.now, partitionLimits: { writeUnits: 50 } });
    try {
      const fixture = await storesOnFreshTable({
        endpoint: engine.endpoint,
        maxAttempts: 1,
        // Throttles answered at once: with the clock stopped no partition regains a unit anyway.
        throttleRetry: { attempts: 3, backoff: { firstMs: 1, maxMs: 1 } },
      });
      const landed = async (shards: number) => {
        const runId = await newStoredRun(fixture.stores, 1000, shards);
        // 160 events of 600 bytes: 1 unit each alone, 2 in a group commit's transaction.
        const outcomes = await Promise.allSettled(
          range(160).map((i) =>
            fixture.stores.events.append({ tenant: TENANT, runId, type: 'step', payload: { i, pad: 'x'.repeat(600) } }),
          ),
        );
        const seqs = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value.seq] : []));
        // Whatever landed is contiguous from 1; whatever failed was refused by a throttle, nothing else.
        expect(seqs.sort((a, b) => a - b)).toEqual(range(seqs.length));
        for (const o of outcomes) if (o.status === 'rejected') expect(isThrottle(o.reason), String(o.reason)).toBe(true);
        return seqs.length;
      };
      const one = await landed(1);
      const eight = await landed(8);
      expect(one).toBeGreaterThan(0);
      expect(one).toBeLessThan(160);
      expect(eight).toBeGreaterThanOrEqual(4 * one);
      expect(fixture.throttles.throttled.append ?? 0).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });
});

test('pages merge shards that hold uneven shares: a type in one shard only, newest first, one request per shard', async () => {
  const { stores } = await storesOnFreshTable();
  const runId = await newStoredRun(stores, 1000, 4);
  // One at a time, so seq n has type "tool" exactly when n % 4 == 0: every tool event is in shard 0.
  for (const n of range(40)) await stores.events.append({ tenant: TENANT, runId, type: n % 4 === 0 ? 'tool' : 'step', payload: { n } });
  const tools = await stores.events.page({ tenant: TENANT, runId, limit: 6, types: ['tool'], consistent: true });
  expect(tools.events.map((e) => e.seq)).toEqual([4, 8, 12, 16, 20, 24]);
  expect(tools.more).toBe(true);
  const steps = await stores.events.page({ tenant: TENANT, runId, after: 30, limit: 100, types: ['step'], consistent: true });
  expect(steps.events.map((e) => e.seq)).toEqual([31, 33, 34, 35, 37, 38, 39]);
  expect(steps.more).toBe(false);
  const newest = await stores.events.page({ tenant: TENANT, runId, before: 38, limit: 5, forward: false, consistent: true });
  expect(newest.events.map((e) => e.seq)).toEqual([37, 36, 35, 34, 33]);
  expect(newest.more).toBe(true);
  // One request per shard: what is handed out is in order and without a gap, and more says whether it stopped early.
  const first = await stores.events.page({ tenant: TENANT, runId, limit: 25, consistent: true, singleRequest: true });
  expect(first.events.map((e) => e.seq)).toEqual(range(first.events.length));
  expect(first.events.length).toBeGreaterThan(0);
  expect(first.more).toBe(true);
  expect(await stores.events.lastSeq(TENANT, runId)).toBe(40);
});
