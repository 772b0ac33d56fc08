/**
 * Faults among three replicas on one table and one Redis:
 * - the shard's owner is SIGKILLed: another takes the shard over within the lease plus one
 *   poll, reads on from the checkpoint, and no subscriber misses or repeats an event;
 * - Redis is killed and started again (empty): every replica says degraded meanwhile, and
 *   subscribers on all of them catch up from the table without loss;
 * - the owner stalls past its lease (SIGSTOP) and wakes: another has taken over, and the
 *   stale one writes nothing more under its old token.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Client } from 'graphql-ws';
import { describe, expect, test } from 'vitest';
import { eventItem } from '../../src/table/codec.ts';
import { dynamoClient, readStream, streamsClient, uniqueName } from '../support/aws.ts';
import { leftoversAfterEach } from '../support/leftovers.ts';
import { noRedis, redisForFile } from '../support/redis.ts';
import { type Replica, shardsOwned, shardsOwnedBy, startReplica, stopReplica } from '../support/replicas.ts';
import { overlaps, staleWrites, tenures } from '../support/shard-history.ts';
import { type Collected, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const LEASE_SECONDS = 4;
/** The poller's longest pause on a quiet shard (its default). */
const ONE_POLL_MS = 300;
/** Room for a machine shared with other test files (process scheduling, not the design). */
const LOADED_MACHINE_MS = 1_500;

const redis = redisForFile();
const leftovers = leftoversAfterEach();
const doc = DynamoDBDocumentClient.from(dynamoClient());

async function cluster() {
  const table = uniqueName('faults');
  const first = await startReplica({ table, redisUrl: redis.url, leaseSeconds: LEASE_SECONDS });
  const rest = await Promise.all([1, 2].map(() => startReplica({ table, redisUrl: redis.url, leaseSeconds: LEASE_SECONDS })));
  const replicas = [first, ...rest];
  leftovers.push(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
  });
  await waitFor(async () => (await shardsOwnedBy(replicas)) === 1, {
    timeoutMs: 30_000,
    what: 'one replica to hold the shard',
  });
  const owner = (await Promise.all(replicas.map(shardsOwned))).indexOf(1);
  const runId = uniqueName('run');
  await first.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`);
  return { table, replicas, owner, runId };
}

const append = (r: Replica, runId: string) =>
  r.gql<{ appendEvent: { seq: number } }>(
    'mutation($id: ID!) { appendEvent(input: { runId: $id, type: "api" }) { ... on Event { seq } } }',
    {
      id: runId,
    },
  );

const putDirect = (table: string, runId: string, seq: number) =>
  doc.send(
    new PutCommand({
      TableName: table,
      Item: eventItem('default', { runId, seq, type: 'direct', payload: null, createdAt: new Date() }, `direct-${seq}`),
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );

function subscribeOn(replicas: Replica[], runId: string) {
  const clients: Client[] = replicas.map((r) => wsClient(r.url));
  leftovers.push(async () => {
    for (const client of clients) await client.dispose();
  });
  return clients.map((client) =>
    subscribeWs<{ seq: number }>(
      client,
      'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq } }',
      { id: runId },
      'runEvents',
    ),
  );
}

async function expectExactly(subscribers: Collected<{ seq: number }>[], total: number) {
  await Promise.all(subscribers.map((s) => s.until(total, 60_000)));
  for (const s of subscribers) expect(s.items.map((e) => e.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
}

async function leaseHistory(table: string) {
  const { Table } = await dynamoClient().send(new DescribeTableCommand({ TableName: table }));
  return readStream(streamsClient(), Table?.LatestStreamArn as string, () => true);
}

describe.skipIf(noRedis)('replica faults', () => {
  test('SIGKILL of the owner: another takes over within the lease plus one poll, from the checkpoint, losing and repeating nothing', async () => {
    const { table, replicas, owner, runId } = await cluster();
    const survivors = replicas.filter((_, i) => i !== owner);
    const subscribers = subscribeOn(survivors, runId);
    for (let i = 0; i < 5; i++) await append(survivors[i % 2] as Replica, runId);
    await Promise.all(subscribers.map((s) => s.until(5, 30_000)));

    await stopReplica(replicas[owner] as Replica, 'SIGKILL');
    const killedAt = Date.now();
    // Written around the API: a stream reader brings it, or (while the dead owner's heartbeats are
    // missing, the survivors are degraded) the survivors' table refill.
    await putDirect(table, runId, 6);
    await Promise.all(subscribers.map((s) => s.until(6, 30_000)));
    await waitFor(async () => (await shardsOwnedBy(survivors)) === 1, {
      timeoutMs: 30_000,
      intervalMs: 50,
      what: 'a survivor to take the shard over',
    });
    expect(Date.now() - killedAt).toBeLessThanOrEqual(LEASE_SECONDS * 1000 + ONE_POLL_MS + LOADED_MACHINE_MS);
    for (let i = 0; i < 5; i++) await append(survivors[i % 2] as Replica, runId);
    await expectExactly(subscribers, 11);

    expect(await shardsOwnedBy(survivors)).toBe(1);
    const history = await leaseHistory(table);
    expect(overlaps(tenures(history))).toEqual([]);
    expect(new Set(tenures(history).map((t) => t.owner)).size).toBeGreaterThanOrEqual(2);
  });

  test('Redis killed and started again: degraded meanwhile, then every subscriber catches up without loss', async () => {
    const { table, replicas, runId } = await cluster();
    const subscribers = subscribeOn(replicas, runId);
    for (const r of replicas) await append(r, runId);
    await Promise.all(subscribers.map((s) => s.until(3, 30_000)));

    await redis.kill();
    const readiness = async (r: Replica) => ((await (await fetch(new URL('/ready', r.url))).json()) as { status: string }).status;
    await waitFor(async () => (await Promise.all(replicas.map(readiness))).every((s) => s === 'degraded'), {
      timeoutMs: 30_000,
      what: 'every replica to say degraded',
    });
    for (let i = 0; i < 6; i++) await append(replicas[i % 3] as Replica, runId);
    await putDirect(table, runId, 10);
    await append(replicas[1] as Replica, runId);

    await redis.start();
    await expectExactly(subscribers, 11);
    await waitFor(async () => (await Promise.all(replicas.map(readiness))).every((s) => s === 'ready'), {
      timeoutMs: 30_000,
      what: 'every replica to be ready again',
    });
    // Live again through Redis.
    await append(replicas[2] as Replica, runId);
    await expectExactly(subscribers, 12);
  });

  test('an owner stalled past its lease wakes to find the shard taken, and writes nothing under its old token', async () => {
    const { table, replicas, owner, runId } = await cluster();
    const stale = replicas[owner] as Replica;
    const others = replicas.filter((_, i) => i !== owner);
    const subscribers = subscribeOn(replicas, runId);
    await append(others[0] as Replica, runId);
    await Promise.all(subscribers.map((s) => s.until(1, 30_000)));

    stale.child.kill('SIGSTOP');
    try {
      await waitFor(async () => (await shardsOwnedBy(others)) === 1, {
        timeoutMs: 30_000,
        what: 'another replica to take the shard',
      });
      await putDirect(table, runId, 2);
      await append(others[1] as Replica, runId);
    } finally {
      stale.child.kill('SIGCONT');
    }
    await waitFor(async () => (await shardsOwned(stale)) === 0, { timeoutMs: 30_000, what: 'the stale owner to let the shard go' });
    await append(stale, runId);
    await expectExactly(subscribers, 4);

    const history = await leaseHistory(table);
    expect(staleWrites(history)).toEqual([]);
    expect(overlaps(tenures(history))).toEqual([]);
  });
});
