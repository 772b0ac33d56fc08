/**
 * A run created with eventShards spreads its events over that many partition keys, each seq in
 * one of them: everything a run of one partition does still holds, through the API.
 */
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';

const CREATE = `mutation($input: CreateRunInput!) {
  createRun(input: $input) { __typename ... on Run { id eventShards } }
}`;
const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } ... on Error { message } } }`;
const RUN_EVENTS = `subscription($runId: ID!, $afterSeq: Int, $types: [String!]) {
  runEvents(runId: $runId, afterSeq: $afterSeq, types: $types) { seq type }
}`;

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const range = (n: number, from = 1) => Array.from({ length: n }, (_, i) => i + from);

async function shardedRun(eventShards = 8) {
  const id = uniqueName('run');
  const created = await api.gql(CREATE, { input: { id, task: 't', budgetCap: 1000, eventShards } });
  expect(created.data?.createRun).toEqual({ __typename: 'Run', id, eventShards });
  return id;
}

/** The seqs stored in each of the run's partitions, read straight from the table. */
async function seqsByPartition(runId: string, shards: number) {
  return Promise.all(
    [keys.runPartition(OPEN_TENANT, runId), ...keys.eventPartitions(OPEN_TENANT, runId, shards)].map(async (pk) => {
      const { Items = [] } = await api.server.clients.doc.send(
        new QueryCommand({
          TableName: api.table,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :evt)',
          ExpressionAttributeValues: { ':pk': pk, ':evt': 'evt#' },
          ConsistentRead: true,
        }),
      );
      return Items.map((item) => Number(item.seq));
    }),
  );
}

const appendMany = (runId: string, count: number, type = (i: number) => (i % 3 === 0 ? 'tool' : 'step')) =>
  Promise.all(range(count).map((i) => api.gql(APPEND, { input: { runId, type: type(i), payload: { i } } })));

describe('creating', () => {
  test('eventShards defaults to 1 and is refused outside 1..16, naming the field, with nothing written', async () => {
    const plain = uniqueName('run');
    expect((await api.gql(CREATE, { input: { id: plain, task: 't', budgetCap: 1 } })).data?.createRun.eventShards).toBe(1);
    for (const eventShards of [0, 17, -1]) {
      const id = uniqueName('run');
      const refused = await api.gql(CREATE, { input: { id, task: 't', budgetCap: 1, eventShards } });
      expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      expect(refused.errors?.[0]?.message).toMatch(/eventShards/);
      expect((await api.gql('query($id: ID!) { run(id: $id, consistent: true) { id } }', { id })).data?.run).toBeNull();
    }
  });
});

describe('an 8-shard run', () => {
  test('64 concurrent writers, 3 appends each: seqs 1..192 exactly once, each in the partition of seq % 8', async () => {
    const runId = await shardedRun(8);
    const answers = await Promise.all(
      range(64).map(async (writer) => {
        const seqs: number[] = [];
        for (const n of range(3)) {
          const answer = await api.gql(APPEND, { input: { runId, type: 'step', payload: { writer, n } } });
          expect(answer.data?.appendEvent.__typename, JSON.stringify(answer)).toBe('Event');
          seqs.push(answer.data?.appendEvent.seq);
        }
        return seqs;
      }),
    );
    expect(answers.flat().sort((a, b) => a - b)).toEqual(range(192));
    const [own, ...shards] = await seqsByPartition(runId, 8);
    expect(own).toEqual([]);
    shards.forEach((seqs, shard) => {
      expect(seqs.length).toBe(24);
      for (const seq of seqs) expect(seq % 8).toBe(shard);
    });
    // An explicit seq that is taken is still refused: its one home holds it.
    const taken = await api.gql(APPEND, { input: { runId, type: 'step', seq: 100 } });
    expect(taken.data?.appendEvent).toMatchObject({ __typename: 'SequenceConflict' });
    const next = await api.gql(APPEND, { input: { runId, type: 'step', seq: 193 } });
    expect(next.data?.appendEvent).toEqual({ __typename: 'Event', seq: 193 });
  });

  test("run(id)'s story: metadata, budget, lastSeq and the first events in seq order, from cold and from warm", async () => {
    const runId = await shardedRun(8);
    await appendMany(runId, 30);
    const STORY = `query($id: ID!) { run(id: $id, consistent: true) {
      id eventShards status budget { spent } lastSeq events(first: 12) { edges { node { seq } } pageInfo { hasNextPage } } } }`;
    const story = (await api.gql(STORY, { id: runId })).data?.run;
    expect(story).toMatchObject({ id: runId, eventShards: 8, status: 'RUNNING', budget: { spent: 0 }, lastSeq: 30 });
    expect(story.events.edges.map((e: { node: { seq: number } }) => e.node.seq)).toEqual(range(12));
    expect(story.events.pageInfo.hasNextPage).toBe(true);
    const all = (await api.gql(STORY.replace('first: 12', 'first: 100'), { id: runId })).data?.run;
    expect(all.events.edges.map((e: { node: { seq: number } }) => e.node.seq)).toEqual(range(30));
    expect(all.events.pageInfo.hasNextPage).toBe(false);
    // A server that never saw the run learns its shard count from the metadata row: one Query
    // of the run's partition, then one per shard; afterwards, all nine at once.
    const cold = await startTestServer({ table: api.table });
    const FIRST = `query($id: ID!) { run(id: $id) { eventShards events(first: 5) { edges { node { seq } } } } }`;
    for (const _ of ['cold', 'warm']) {
      const from = cold.requests.length;
      const read = (await cold.gql(FIRST, { id: runId })).data?.run;
      expect(read.events.edges.map((e: { node: { seq: number } }) => e.node.seq)).toEqual(range(5));
      expect(cold.requests.slice(from)).toEqual(Array(9).fill('QueryCommand'));
    }
  });

  test('events paging forward and backward, with afterSeq and type filters, in seq order with no gap or repeat', async () => {
    const runId = await shardedRun(8);
    await appendMany(runId, 45);
    const PAGE = `query($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $afterSeq: Int, $types: [String!]) {
      run(id: $id) { events(first: $first, after: $after, last: $last, before: $before, afterSeq: $afterSeq, types: $types) {
        edges { cursor node { seq type } } pageInfo { hasNextPage hasPreviousPage endCursor startCursor } } } }`;
    const read = async (variables: Record<string, unknown>) => (await api.gql(PAGE, { id: runId, ...variables })).data?.run.events;
    const forward: number[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await read({ first: 7, after });
      forward.push(...page.edges.map((e: { node: { seq: number } }) => e.node.seq));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(forward).toEqual(range(45));
    const backward: number[] = [];
    let before: string | undefined;
    for (;;) {
      const page = await read({ last: 10, before });
      backward.unshift(...page.edges.map((e: { node: { seq: number } }) => e.node.seq));
      if (!page.pageInfo.hasPreviousPage) break;
      before = page.pageInfo.startCursor;
    }
    expect(backward).toEqual(range(45));
    const tools = await read({ first: 100, types: ['tool'], afterSeq: 10 });
    // Appends raced, so which seq got which type is the store's; the filter keeps exactly the tool events after 10.
    const seqs = tools.edges.map((e: { node: { seq: number } }) => e.node.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(tools.edges.every((e: { node: { type: string } }) => e.node.type === 'tool')).toBe(true);
    const everything = (await read({ first: 100 })).edges.map((e: { node: { seq: number; type: string } }) => e.node);
    expect(seqs).toEqual(
      everything.filter((e: { seq: number; type: string }) => e.type === 'tool' && e.seq > 10).map((e: { seq: number }) => e.seq),
    );
  });

  test('runEvents from every afterSeq: the history from the table, joined to the live events, none missing or repeated', async () => {
    const runId = await shardedRun(8);
    await appendMany(runId, 20);
    const client = wsClient(api.url);
    try {
      const subscriptions = range(21, 0).map((afterSeq) => ({
        afterSeq,
        events: subscribeWs<{ seq: number }>(client, RUN_EVENTS, { runId, afterSeq }, 'runEvents'),
      }));
      for (const { afterSeq, events } of subscriptions) await events.until(20 - afterSeq);
      await appendMany(runId, 20);
      for (const { afterSeq, events } of subscriptions) {
        await events.until(40 - afterSeq);
        expect(events.items.map((e) => e.seq)).toEqual(range(40 - afterSeq, afterSeq + 1));
      }
      for (const { events } of subscriptions) events.stop();
    } finally {
      await client.dispose();
    }
  });

  test("a write straight into a shard's partition reaches subscribers through the stream, in its place", async () => {
    const runId = await shardedRun(4);
    await appendMany(runId, 5);
    const client = wsClient(api.url);
    try {
      const events = subscribeWs<{ seq: number; type: string }>(client, RUN_EVENTS, { runId, afterSeq: 0 }, 'runEvents');
      await events.until(5);
      // Another service writes seq 6 into shard 2, as the table's keys say.
      await api.server.clients.doc.send(
        new PutCommand({
          TableName: api.table,
          Item: {
            ...keys.event(OPEN_TENANT, runId, 6, 4),
            runId,
            seq: 6,
            type: 'direct',
            payload: null,
            createdAt: new Date().toISOString(),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      await events.until(6);
      expect(events.items[5]).toEqual({ seq: 6, type: 'direct' });
      // The API's next append goes after it.
      expect((await api.gql(APPEND, { input: { runId, type: 'step' } })).data?.appendEvent).toEqual({ __typename: 'Event', seq: 7 });
      await events.until(7);
      expect(events.items.map((e) => e.seq)).toEqual(range(7));
      events.stop();
    } finally {
      await client.dispose();
    }
  });

  test('an idempotency key on a sharded append is honoured, and approvals write their events into the shards', async () => {
    const runId = await shardedRun(3);
    const keyed = { runId, type: 'step', payload: { once: true }, idempotencyKey: uniqueName('k') };
    const first = await api.gql(APPEND, { input: keyed });
    const again = await api.gql(APPEND, { input: keyed });
    expect(again.data?.appendEvent).toEqual(first.data?.appendEvent);
    const requested = await api.gql(
      `mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { __typename ... on Run { status lastSeq } } }`,
      { input: { runId, request: { q: 'ok?' } } },
    );
    expect(requested.data?.requestApproval).toEqual({ __typename: 'Run', status: 'AWAITING_APPROVAL', lastSeq: 2 });
    const [own, ...shards] = await seqsByPartition(runId, 3);
    expect(own).toEqual([]);
    expect(shards).toEqual([[], [1], [2]]);
  });
});
