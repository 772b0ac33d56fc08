/**
 * What replicas take from Redis, on a real redis-server and replica processes of this file's
 * own: entries anyone could write there (forged, oversized) are dropped and counted, and the
 * real events reach subscribers in order; a full Redis makes every replica degraded, and their
 * subscribers are filled from the table meanwhile, losing nothing; a tenant's caps hold over
 * every replica together.
 */

import type { Client } from 'graphql-ws';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { sealEntry } from '../../src/streams/fanout/entries.ts';
import { uniqueName } from '../support/aws.ts';
import { noRedis, startRedis, type TestRedis } from '../support/redis.ts';
import { type Replica, shardsOwned, startReplica, stopReplica } from '../support/replicas.ts';
import { newRun as createRun } from '../support/runs.ts';
import { type Collected, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

let redis: TestRedis;
let direct: Redis;
const leftovers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  if (noRedis) return;
  redis = await startRedis();
  direct = new Redis(redis.url);
});
afterAll(async () => {
  direct?.disconnect();
  await redis?.kill();
});
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

async function pair(env: Record<string, string> = {}) {
  const table = uniqueName('trust');
  const a = await startReplica({ table, redisUrl: redis.url, env });
  const b = await startReplica({ table, redisUrl: redis.url, env });
  leftovers.push(async () => {
    await Promise.all([a, b].map((r) => stopReplica(r, 'SIGKILL')));
  });
  await waitFor(async () => (await shardsOwned(a)) + (await shardsOwned(b)) === 1, {
    timeoutMs: 30_000,
    what: 'one replica to hold the shard',
  });
  const owner = (await shardsOwned(a)) === 1 ? a : b;
  return { table, a, b, owner, other: owner === a ? b : a };
}

function watch(replica: Replica, runId: string) {
  const client: Client = wsClient(replica.url);
  leftovers.push(async () => {
    await client.dispose();
  });
  return subscribeWs<{ seq: number; type: string }>(
    client,
    'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq type } }',
    { id: runId },
    'runEvents',
  );
}

const append = (r: Replica, runId: string, type = 'real') =>
  r.gql<{ appendEvent: { seq: number } }>(
    'mutation($id: ID!, $type: String!) { appendEvent(input: { runId: $id, type: $type }) { ... on Event { seq } } }',
    {
      id: runId,
      type,
    },
  );

const newRun = (r: Replica) => createRun(r, { budgetCap: 1 });

async function expectSeqs(subscriber: Collected<{ seq: number; type: string }>, total: number) {
  await subscriber.until(total, 60_000);
  expect(subscriber.items).toEqual(Array.from({ length: total }, (_, i) => ({ seq: i + 1, type: 'real' })));
}

const readiness = async (r: Replica) => (await (await fetch(new URL('/ready', r.url))).json()) as { status: string; reason?: string };
/** What /ready and /metrics both say: 'degraded', 'ready', or that they disagree. */
const degradedOrReady = async (r: Replica) => {
  const [{ status }, metrics] = await Promise.all([readiness(r), r.metrics()]);
  const gauge = metrics.get('runplane_redis_degraded');
  return status === 'degraded' && gauge === 1 ? 'degraded' : status === 'ready' && gauge === 0 ? 'ready' : `${status}, gauge ${gauge}`;
};

describe.skipIf(noRedis)('what replicas take from Redis', () => {
  test('forged and oversized entries are dropped and counted; the real events reach the other replica`s subscriber in order', async () => {
    const { table, a, b } = await pair();
    const runId = await newRun(a);
    const subscriber = watch(b, runId);
    await append(a, runId);
    await append(a, runId);
    await expectSeqs(subscriber, 2);
    const key = `runplane:${table}:changes`;
    const forgedEvent = {
      kind: 'event',
      tenant: 'default',
      runId,
      event: { runId, seq: 3, type: 'forged', payload: { approved: true }, createdAt: new Date().toISOString() },
    };
    // As the attacker wrote it, in the new format sealed with a guessed secret, and one of 40 MB.
    await direct.xadd(key, '*', 'from', 'x', 'c', JSON.stringify(forgedEvent));
    await direct.xadd(
      key,
      '*',
      ...sealEntry('a-guess-at-the-secret-of-these-replicas', key, {
        from: 'x',
        n: 1,
        at: Date.now(),
        kind: 'change',
        value: JSON.stringify(forgedEvent),
      }),
    );
    await direct.xadd(key, '*', 'from', 'x', 'c', 'x'.repeat(40 * 1024 * 1024));
    const { run } = (await b.gql<{ run: { lastSeq: number } }>(`{ run(id: "${runId}", consistent: true) { lastSeq } }`)).data ?? {};
    expect(run?.lastSeq).toBe(2);
    // The real seq 3, appended after the forgery, is not taken for a duplicate.
    await append(a, runId);
    await append(a, runId);
    await expectSeqs(subscriber, 4);
    await waitFor(
      async () => {
        const metrics = await b.metrics();
        // The old-format forgery and the 40 MB entry (malformed or oversized), the guessed seal.
        return (
          (metrics.get('runplane_redis_dropped_total{reason="malformed"}') ?? 0) +
            (metrics.get('runplane_redis_dropped_total{reason="oversized"}') ?? 0) >=
            2 && (metrics.get('runplane_redis_dropped_total{reason="unauthenticated"}') ?? 0) >= 1
        );
      },
      { timeoutMs: 10_000, what: 'the drops counted' },
    );
    const metrics = await b.metrics();
    expect(metrics.get('runplane_redis_dropped_total{reason="malformed"}') ?? 0).toBeGreaterThanOrEqual(1);
    // One report line, not one per entry.
    expect(b.output().match(/Redis: dropped/g)?.length ?? 0).toBeLessThanOrEqual(2);
    // And the 40 MB entry is not held (heap back under 200 MB).
    expect(metrics.get('runplane_process_heap_used_bytes') ?? 0).toBeLessThan(200 * 1024 * 1024);
  });

  test('a full Redis (noeviction): every replica is degraded within seconds (/ready and /metrics), subscribers are filled from the table, nothing is lost; then ready again', async () => {
    const { a, b, owner } = await pair();
    const runId = await newRun(a);
    const onA = watch(a, runId);
    const onB = watch(b, runId);
    await append(a, runId);
    await append(b, runId);
    await Promise.all([expectSeqs(onA, 2), expectSeqs(onB, 2)]);

    const used = Number(/used_memory:(\d+)/.exec(await direct.info('memory'))?.[1]);
    await direct.config('SET', 'maxmemory-policy', 'noeviction');
    await direct.config('SET', 'maxmemory', String(Math.max(1, used - 1024 * 1024)));
    try {
      // Each beats once a second: its next beat is refused.
      await waitFor(async () => (await degradedOrReady(a)) === 'degraded' && (await degradedOrReady(b)) === 'degraded', {
        timeoutMs: 10_000,
        what: 'both replicas to say degraded on /ready and /metrics',
      });
      // Written through the shard's reader while Redis takes nothing: the other replica hears of them
      // only from the table (no write of its own reveals a hole), and its subscriber still gets every one.
      for (let i = 0; i < 6; i++) await append(owner, runId);
      await Promise.all([expectSeqs(onA, 8), expectSeqs(onB, 8)]);
    } finally {
      await direct.config('SET', 'maxmemory', '0');
    }
    await waitFor(async () => (await degradedOrReady(a)) === 'ready' && (await degradedOrReady(b)) === 'ready', {
      timeoutMs: 10_000,
      what: 'both replicas to be ready again on /ready and /metrics',
    });
    for (let i = 0; i < 2; i++) await append(i % 2 ? b : a, runId);
    await Promise.all([expectSeqs(onA, 10), expectSeqs(onB, 10)]);
  });

  test('a tenant`s subscription cap holds over both replicas together, and frees on either', async () => {
    const { a, b } = await pair({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: '4' });
    const runId = await newRun(a);
    const onA = [0, 1, 2, 3].map(() => watch(a, runId));
    await append(a, runId);
    await Promise.all(onA.map((s) => s.until(1, 30_000)));
    // B learns what A holds within a second or so: until then a subscription may pass, and is closed again.
    let refusal: unknown;
    await waitFor(
      async () => {
        const attempt = watch(b, runId);
        await waitFor(() => attempt.items.length > 0 || attempt.errors.length > 0, { timeoutMs: 30_000, what: 'an answer' });
        attempt.stop();
        refusal = attempt.errors[0];
        return refusal !== undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'B to refuse past the cap' },
    );
    expect(JSON.stringify(refusal)).toMatch(
      /Too many open subscriptions for this tenant \(limit 4, RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT\)/,
    );
    for (const s of onA.slice(0, 2)) s.stop();
    await waitFor(
      async () => {
        const attempt = watch(b, runId);
        await waitFor(() => attempt.items.length > 0 || attempt.errors.length > 0, { timeoutMs: 30_000, what: 'an answer' });
        attempt.stop();
        return attempt.items.length > 0;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'B to admit once A gave places back' },
    );
  });
});
