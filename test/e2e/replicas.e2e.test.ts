/**
 * Three server processes on one table and one Redis: every subscriber on every replica gets
 * every event, appended through any replica or straight into the table, exactly once and in
 * order; one replica reads the stream's shard at a time (lease rows' history and /metrics),
 * and the others make no GetRecords at all.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { eventItem } from '../../src/table/codec.ts';
import { dynamoClient, readStream, streamsClient, uniqueName } from '../support/aws.ts';
import { noRedis, startRedis, type TestRedis } from '../support/redis.ts';
import { type Replica, shardsOwned, shardsOwnedBy, startReplica, stopReplica } from '../support/replicas.ts';
import { overlaps, tenures } from '../support/shard-history.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const table = uniqueName('replicas');
let redis: TestRedis;
let replicas: Replica[] = [];

const getRecords = async (r: Replica) => (await r.metrics()).get('runplane_stream_getrecords_total') ?? 0;

describe.skipIf(noRedis)('three replicas on one table and one Redis', () => {
  beforeAll(async () => {
    redis = await startRedis();
    // The first creates the table; the others join it.
    replicas = [await startReplica({ table, redisUrl: redis.url })];
    replicas.push(...(await Promise.all([1, 2].map(() => startReplica({ table, redisUrl: redis.url })))));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
    await redis?.kill();
  });

  test('each shard has one owner, and only the owner reads it', async () => {
    await waitFor(async () => (await shardsOwnedBy(replicas)) === 1, {
      timeoutMs: 30_000,
      what: 'one replica to hold the shard',
    });
    const before = await Promise.all(replicas.map(getRecords));
    const owners = await Promise.all(replicas.map(shardsOwned));
    await waitFor(async () => (await getRecords(replicas[owners.indexOf(1)] as Replica)) > (before[owners.indexOf(1)] as number) + 5, {
      timeoutMs: 30_000,
      what: 'the owner to poll',
    });
    const after = await Promise.all(replicas.map(getRecords));
    for (const [i, count] of owners.entries()) {
      if (count === 0) expect(after[i], `replica ${i} holds no shard and reads none`).toBe(before[i]);
    }
    expect(await shardsOwnedBy(replicas)).toBe(1);
  });

  test('subscribers on every replica get every event, from every replica and from the table, exactly once and in order', async () => {
    const runId = uniqueName('run');
    const created = await replicas[0]?.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`);
    expect(created?.data).toEqual({ createRun: { __typename: 'Run' } });
    const clients = replicas.map((r) => wsClient(r.url));
    // The shard's holders as each replica's /metrics says, sampled all along.
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) samples.push(await shardsOwnedBy(replicas));
    })();
    try {
      const subscribers = clients.flatMap((client) =>
        [0, 1].map(() =>
          subscribeWs<{ seq: number; type: string }>(
            client,
            'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq type } }',
            { id: runId },
            'runEvents',
          ),
        ),
      );
      const append = (r: Replica, type: string) =>
        r.gql<{ appendEvent: { seq: number } }>(
          'mutation($id: ID!, $type: String!) { appendEvent(input: { runId: $id, type: $type }) { ... on Event { seq } } }',
          {
            id: runId,
            type,
          },
        );
      await append(replicas[0] as Replica, 'first');
      await Promise.all(subscribers.map((s) => s.until(1, 30_000)));
      // From here on everything arrives live, through every replica in turn.
      for (let i = 0; i < 30; i++) await append(replicas[i % 3] as Replica, `via.${i % 3}`);
      const doc = DynamoDBDocumentClient.from(dynamoClient());
      await doc.send(
        new PutCommand({
          TableName: table,
          Item: eventItem('default', { runId, seq: 32, type: 'direct', payload: null, createdAt: new Date() }, 'direct'),
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      for (let i = 0; i < 6; i++) await append(replicas[i % 3] as Replica, `after.${i % 3}`);
      const total = 38;
      await Promise.all(subscribers.map((s) => s.until(total, 30_000)));
      for (const s of subscribers) {
        expect(s.items.map((e) => e.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
        expect(s.items[31]?.type).toBe('direct');
      }
      sampling = false;
      await sampler;
      expect(samples.length).toBeGreaterThan(5);
      expect(new Set(samples)).toEqual(new Set([1]));
      // Every replica sent its own writes to Redis and read the others'; the owner's checkpoint lag is reported per shard.
      const metrics = await Promise.all(replicas.map((r) => r.metrics()));
      for (const m of metrics) {
        expect(m.get('runplane_redis_published_total')).toBeGreaterThan(0);
        expect(m.get('runplane_redis_consumed_total')).toBeGreaterThan(0);
        expect(m.get('runplane_redis_degraded')).toBe(0);
      }
      expect(
        metrics.filter((m) => [...m.keys()].some((k) => k.startsWith('runplane_stream_checkpoint_lag_records{shard="shardId-'))).length,
      ).toBe(1);
    } finally {
      sampling = false;
      await sampler;
      for (const client of clients) await client.dispose();
    }
  });

  test('the lease rows never show two owners of one shard at once', async () => {
    const { Table } = await dynamoClient().send(new DescribeTableCommand({ TableName: table }));
    const records = await readStream(streamsClient(), Table?.LatestStreamArn as string, () => true);
    const history = tenures(records);
    expect(history.length).toBeGreaterThan(0);
    expect(overlaps(history)).toEqual([]);
  });
});
