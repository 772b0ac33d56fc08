/**
 * The API when DynamoDB misbehaves, on an engine of this file's own: responses lost after
 * a write was applied (the SDK resends it), transaction conflicts, tables still CREATING.
 */
import { CreateTableCommand, DescribeTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Engine } from '@runplane/engine';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { tableDefinition } from '../../src/table/definition.ts';
import { ensureTable } from '../../src/table/ensure.ts';
import { dynamoClient, uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun, runPartition } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

describe.skipIf(onlyEmbedded)('resilience', () => {
  let engine: Engine;
  let api: TestServer;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    api = await startTestServer({ endpoint: engine.endpoint });
  });
  afterAll(async () => {
    await api.server.stop();
    await engine.close();
  });

  const rows = async (runId: string) =>
    (
      await api.server.clients.doc.send(
        new QueryCommand({
          TableName: api.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': runPartition(runId) },
          ConsistentRead: true,
        }),
      )
    ).Items ?? [];

  test('a keyed acquire whose answer was lost, retried after another worker took the unit: the first answer, not the new holder', async () => {
    const unitId = uniqueName('unit');
    const ACQUIRE = `mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { __typename ... on Lease { owner token } } }`;
    const first = { unitId, owner: 'a', ttlSeconds: 1, idempotencyKey: uniqueName('key') };
    {
      // Applied, then answered 500 to the SDK's every attempt: the answer is found under the key.
      using _ = engine.faults.inject({ operations: ['TransactWriteItems'], error: 'InternalServerError', after: true, times: 3 });
      const lost = await api.gql(ACQUIRE, { input: first });
      expect(lost.data?.acquireLease).toMatchObject({ __typename: 'Lease', owner: 'a' });
    }
    const held = (await api.gql(`query($u: ID!) { lease(unitId: $u) { owner token } }`, { u: unitId })).data.lease;
    expect(held.owner).toBe('a');
    await waitFor(async () => (await api.gql(`query($u: ID!) { lease(unitId: $u) { owner } }`, { u: unitId })).data.lease === null, {
      what: 'the lease to expire',
    });
    const taken = (await api.gql(ACQUIRE, { input: { unitId, owner: 'b', ttlSeconds: 60 } })).data.acquireLease;
    expect(taken).toMatchObject({ __typename: 'Lease', owner: 'b' });
    const retried = (await api.gql(ACQUIRE, { input: first })).data.acquireLease;
    expect(retried).toEqual({ __typename: 'Lease', owner: 'a', token: held.token });
    expect(taken.token).toBeGreaterThan(held.token);
  });

  describe('a response lost after the write was applied (the SDK resends it)', () => {
    test('an append is stored once, at the seq its writer is told', async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      using _ = engine.faults.inject({ operations: ['PutItem'], error: 'InternalServerError', after: true, times: 1 });
      const { data } = await api.gql(
        `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`,
        {
          input: { runId, type: 'once' },
        },
      );
      expect(data.appendEvent).toEqual({ __typename: 'Event', seq: 1 });
      expect((await rows(runId)).filter((row) => String(row.sk).startsWith('evt#'))).toHaveLength(1);
    });

    const FENCED_APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`;
    const claimed = async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      const { data } = await api.gql('mutation($input: ClaimRunInput!) { claimRun(input: $input) { ... on RunClaim { token } } }', {
        input: { runId, holder: 'worker', ttlSeconds: 600 },
      });
      return { runId, token: data.claimRun.token as number };
    };
    const eventSeqs = async (runId: string) =>
      (await rows(runId)).filter((row) => String(row.sk).startsWith('evt#')).map((row) => Number(String(row.sk).slice(4)));

    test('a fenced append (a transaction) is stored once, at the seq its writer is told', async () => {
      const { runId, token } = await claimed();
      using _ = engine.faults.inject({ operations: ['TransactWriteItems'], error: 'InternalServerError', after: true, times: 1 });
      const { data } = await api.gql(FENCED_APPEND, { input: { runId, type: 'once', fencingToken: token } });
      expect(data.appendEvent).toEqual({ __typename: 'Event', seq: 1 });
      expect(await eventSeqs(runId)).toEqual([1]);
    });

    test('fenced appends written together: a batch resent after its answer was lost is stored once', async () => {
      const { runId, token } = await claimed();
      // The first write goes alone; the ones queued behind it go as a batch, whose answer is lost.
      using lost = engine.faults.inject({
        operations: ['TransactWriteItems'],
        error: 'InternalServerError',
        after: true,
        skip: 1,
        times: 1,
      });
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          api.gql(FENCED_APPEND, { input: { runId, type: 'step', payload: { i }, fencingToken: token } }),
        ),
      );
      const seqs = answers.map((answer) => answer.data?.appendEvent?.seq).sort((a, b) => a - b);
      expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(await eventSeqs(runId)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(lost.hits).toBe(1);
    });

    test('a charge is applied once', async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      using _ = engine.faults.inject({ operations: ['UpdateItem'], error: 'InternalServerError', after: true, times: 1 });
      const { data } = await api.gql(
        `mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename ... on Budget { spent } } }`,
        {
          input: { runId, amount: 10 },
        },
      );
      expect(data.chargeBudget).toEqual({ __typename: 'Budget', spent: 10 });
      expect((await rows(runId)).find((row) => row.sk === '#budget')).toMatchObject({ spent: 10, remaining: 90 });
    });

    test('a transition reports success, not a conflict with itself', async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      using _ = engine.faults.inject({ operations: ['UpdateItem'], error: 'InternalServerError', after: true, times: 1 });
      const { data } = await api.gql(
        `mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename ... on Run { status version } } }`,
        {
          input: { runId, from: 'RUNNING', to: 'COMPLETED' },
        },
      );
      expect(data.transitionRun).toEqual({ __typename: 'Run', status: 'COMPLETED', version: 2 });
    });
  });

  describe('transaction conflicts are retried', () => {
    test('an append with a cost goes through after conflicts', async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      using conflict = engine.faults.inject({ operations: ['TransactWriteItems'], error: 'TransactionConflictException', times: 2 });
      const { data } = await api.gql(
        `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`,
        {
          input: { runId, type: 'paid', cost: 5 },
        },
      );
      expect(data.appendEvent).toEqual({ __typename: 'Event', seq: 1 });
      expect(conflict.hits).toBe(2);
      expect((await rows(runId)).find((row) => row.sk === '#budget')).toMatchObject({ spent: 5 });
    });

    test('a charge goes through after conflicts', async () => {
      const runId = await newRun(api, { budgetCap: 100 });
      using _ = engine.faults.inject({ operations: ['UpdateItem'], error: 'TransactionConflictException', times: 2 });
      const { data } = await api.gql(
        `mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename ... on Budget { spent } } }`,
        {
          input: { runId, amount: 7 },
        },
      );
      expect(data.chargeBudget).toEqual({ __typename: 'Budget', spent: 7 });
    });
  });

  test('a run whose first page passes 1 MB still reports every event', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const payload = { blob: 'x'.repeat(60_000) };
    for (let i = 0; i < 20; i++) {
      await api.gql(`mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }`, {
        input: { runId, type: 'big', payload },
      });
    }
    const { data } = await api.gql(
      `query($id: ID!) { run(id: $id) { lastSeq events(first: 50) { edges { node { seq } } pageInfo { hasNextPage } } } }`,
      {
        id: runId,
      },
    );
    expect(data.run.lastSeq).toBe(20);
    expect(data.run.events.edges).toHaveLength(20);
    expect(data.run.events.pageInfo.hasNextPage).toBe(false);
  });

  test('replicas starting at once on a new table all start: one creates it and turns TTL on, the others find it so', async () => {
    const client = dynamoClient({ endpoint: engine.endpoint });
    const name = uniqueName('together');
    // Each call reads TTL as off before any has turned it on, then turns it on: all but one are told it already is.
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => ensureTable(client, name, { create: true })));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(results.filter((r) => r.status === 'fulfilled' && r.value).length).toBe(1);
    const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
    expect(TimeToLiveDescription?.TimeToLiveStatus).toBe('ENABLED');
  });

  test('a server starting while its table is still CREATING waits until it is ACTIVE', async () => {
    const slow = await ownEngine({ createTableMs: 300 });
    try {
      const client = dynamoClient({ endpoint: slow.engine.endpoint });
      const name = uniqueName('creating');
      await client.send(new CreateTableCommand(tableDefinition(name)));
      await ensureTable(client, name, { create: true });
      const server = await startTestServer({ endpoint: slow.engine.endpoint, table: name, stopAfterAll: false });
      const { data } = await server.gql(`mutation { createRun(input: { task: "t", budgetCap: 1 }) { __typename } }`);
      expect(data.createRun.__typename).toBe('Run');
      await server.server.stop();
    } finally {
      await slow.engine.close();
    }
  });
});
