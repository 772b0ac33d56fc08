/**
 * Shards changing hands among three replicas on an engine of the test's own: shards roll
 * over (a child after its parent is drained, whichever replica read the parent), and a
 * replica stopped gracefully hands its shard back, so another reads on long before the lease
 * would have run out. Subscribers on the replicas that stay get every event once, in order.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand } from '@aws-sdk/client-dynamodb-streams';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { eventItem } from '../../src/table/codec.ts';
import { readStream, uniqueName } from '../support/aws.ts';
import { ownEngine } from '../support/engine.ts';
import { noRedis, startRedis, type TestRedis } from '../support/redis.ts';
import { type Replica, shardsOwned, startReplica, stopReplica } from '../support/replicas.ts';
import { lineageViolations, overlaps, tenures } from '../support/shard-history.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

/** Long enough that a takeover well within it can only be a hand-back. */
const LEASE_SECONDS = 30;

let redis: TestRedis;
let own: Awaited<ReturnType<typeof ownEngine>>;
const replicas: Replica[] = [];
const table = uniqueName('handover');

const ownerIndex = async (among: Replica[]) => (await Promise.all(among.map(shardsOwned))).indexOf(1);

describe.skipIf(noRedis)('shards changing hands', () => {
  beforeAll(async () => {
    redis = await startRedis();
    own = await ownEngine();
    const start = () => startReplica({ table, redisUrl: redis.url, endpoint: own.engine.endpoint, leaseSeconds: LEASE_SECONDS });
    replicas.push(await start());
    replicas.push(...(await Promise.all([1, 2].map(start))));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
    await redis?.kill();
    await own?.engine.close();
  });

  test('rollovers and a graceful stop: children after parents, the shard handed back, nothing lost or repeated', async () => {
    const doc = DynamoDBDocumentClient.from(own.client);
    const runId = uniqueName('run');
    await replicas[0]?.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`);
    await waitFor(async () => (await ownerIndex(replicas)) >= 0, { timeoutMs: 30_000, what: 'an owner' });
    const first = await ownerIndex(replicas);
    const stays = replicas.filter((_, i) => i !== first);
    const clients = stays.map((r) => wsClient(r.url));
    let seq = 0;
    const append = async (r: Replica) => {
      const answer = await r.gql<{ appendEvent: { seq: number } }>(
        'mutation($id: ID!) { appendEvent(input: { runId: $id, type: "api" }) { ... on Event { seq } } }',
        { id: runId },
      );
      seq = answer.data?.appendEvent.seq ?? Number.NaN;
    };
    const direct = async () => {
      seq++;
      await doc.send(
        new PutCommand({
          TableName: table,
          Item: eventItem('default', { runId, seq, type: 'direct', payload: null, createdAt: new Date() }, `d${seq}`),
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    };
    try {
      const subscribers = clients.map((c) =>
        subscribeWs<{ seq: number }>(
          c,
          'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq } }',
          { id: runId },
          'runEvents',
        ),
      );
      const delivered = async () => {
        await Promise.all(subscribers.map((s) => s.until(seq, 30_000)));
      };
      for (const r of replicas) await append(r);
      own.engine.control.rolloverShard(table);
      // Only a reader of the child can bring it.
      await direct();
      await delivered();

      const stoppedAt = Date.now();
      await stopReplica(replicas[first] as Replica, 'SIGTERM');
      await waitFor(async () => (await ownerIndex(stays)) >= 0, { timeoutMs: 30_000, what: 'another replica to read on' });
      expect(Date.now() - stoppedAt, 'taken over by hand-back, not by the lease running out').toBeLessThan((LEASE_SECONDS * 1000) / 2);

      await direct();
      await delivered();
      own.engine.control.rolloverShard(table);
      await append(stays[0] as Replica);
      await direct();
      own.engine.control.rolloverShard(table);
      await append(stays[1] as Replica);
      await direct();
      await delivered();
      for (const s of subscribers) expect(s.items.map((e) => e.seq)).toEqual(Array.from({ length: seq }, (_, i) => i + 1));

      const { Table } = await own.client.send(new DescribeTableCommand({ TableName: table }));
      const { StreamDescription } = await own.streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
      const parents = new Map(
        (StreamDescription?.Shards ?? []).filter((s) => s.ParentShardId).map((s) => [s.ShardId as string, s.ParentShardId as string]),
      );
      expect(parents.size).toBe(3);
      const records = await readStream(
        own.streams,
        Table?.LatestStreamArn as string,
        (r) => new Set(tenures(r).map((t) => t.shard)).size >= 4,
        10_000,
      );
      expect(lineageViolations(records, parents)).toEqual([]);
      expect(overlaps(tenures(records))).toEqual([]);
      // Every shard was read, by one replica or another.
      expect(new Set(tenures(records).map((t) => t.shard)).size).toBe(4);
    } finally {
      for (const c of clients) await c.dispose();
    }
  });
});
