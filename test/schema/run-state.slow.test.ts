/** Optimistic concurrency on runs, their listing, and TTL of finished runs. */

import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { ownEngine } from '../support/engine.ts';
import { runPartition } from '../support/runs.ts';
import { type GraphQLResponse, startTestServer, type TestServer } from '../support/server.ts';

interface RunsPage {
  edges: { node: { id: string } }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

let api: TestServer;
beforeAll(async () => {
  // An engine whose TTL deletes an item an hour after it expired: a row these tests expire stays
  // until they are done with it, however long a loaded machine takes between their requests.
  const { engine } = await ownEngine({ ttlDeleteDelayMs: 3_600_000 });
  afterAll(() => engine.close());
  api = await startTestServer({ endpoint: engine.endpoint, env: { RUNPLANE_RUN_RETENTION_DAYS: '7' } });
});

const CREATE = `mutation($input: CreateRunInput!) { createRun(input: $input) { __typename ... on Run { id createdAt status } } }`;
const TRANSITION = `mutation($input: TransitionRunInput!) {
  transitionRun(input: $input) {
    __typename
    ... on Run { status version }
    ... on StatusConflict { current currentVersion expectedVersion message }
  }
}`;
const createRun = async (input: Record<string, unknown> = {}) =>
  (await api.gql(CREATE, { input: { id: uniqueName('run'), task: 't', budgetCap: 10, ...input } })).data.createRun;
const transition = async (input: Record<string, unknown>) => (await api.gql(TRANSITION, { input })).data.transitionRun;

describe('optimistic concurrency', () => {
  test('expectedVersion: the transition happens only at that version', async () => {
    const run = await createRun();
    const stale = await transition({ runId: run.id, from: 'RUNNING', to: 'WAITING_FOR_TOOL', expectedVersion: 7 });
    expect(stale).toMatchObject({ __typename: 'StatusConflict', current: 'RUNNING', currentVersion: 1, expectedVersion: 7 });
    expect(stale.message).toMatch(/version 1, not 7/);
    expect(await transition({ runId: run.id, from: 'RUNNING', to: 'WAITING_FOR_TOOL', expectedVersion: 1 })).toEqual({
      __typename: 'Run',
      status: 'WAITING_FOR_TOOL',
      version: 2,
    });
  });

  test('terminal statuses stay terminal', async () => {
    const run = await createRun();
    await transition({ runId: run.id, from: 'RUNNING', to: 'CANCELLED' });
    for (const to of ['RUNNING', 'COMPLETED', 'FAILED', 'WAITING_FOR_TOOL']) {
      const response = await api.gql(TRANSITION, { input: { runId: run.id, from: 'CANCELLED', to } });
      expect(response.errors?.[0]?.message).toContain('CANCELLED is terminal');
    }
  });
});

describe('finished runs expire', () => {
  const row = async (runId: string, sk: string) =>
    (
      await api.server.clients.doc.send(
        new GetCommand({ TableName: api.table, Key: { pk: runPartition(runId), sk }, ConsistentRead: true }),
      )
    ).Item;

  test('a run reaching a terminal status gets its TTL on every row: metadata, budget and claim at once, events after', async () => {
    const run = await createRun();
    for (let i = 0; i < 3; i++) await api.gql(`mutation { appendEvent(input: { runId: "${run.id}", type: "x" }) { __typename } }`);
    const before = Math.floor(Date.now() / 1000);
    await transition({ runId: run.id, from: 'RUNNING', to: 'COMPLETED' });
    const retention = 7 * 86400;
    expect((await row(run.id, '#meta'))?.expiresAt).toBeGreaterThanOrEqual(before + retention);
    expect((await row(run.id, '#budget'))?.expiresAt).toBe((await row(run.id, '#meta'))?.expiresAt);
    // Its claim ends with it (a holderless row on a run nobody claimed), and expires with it.
    expect((await row(run.id, '#claim'))?.expiresAt).toBe((await row(run.id, '#meta'))?.expiresAt);
    // The events get theirs in the background, after the transition returned.
    await api.server.stores.runs.settled();
    const { Items = [] } = await api.server.clients.doc.send(
      new QueryCommand({
        TableName: api.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': runPartition(run.id) },
        ConsistentRead: true,
      }),
    );
    expect(Items.map((item) => item.sk)).toEqual(['#budget', '#claim', '#meta', 'evt#0000000001', 'evt#0000000002', 'evt#0000000003']);
    expect(Items.every((item) => item.expiresAt === Items[0]?.expiresAt)).toBe(true);
  });

  test('a finished run past its retention, not yet deleted, counts as absent: not read, not listed, not appended to', async () => {
    const run = await createRun();
    await transition({ runId: run.id, from: 'RUNNING', to: 'FAILED' });
    const past = Math.floor(Date.now() / 1000) - 60;
    for (const sk of ['#meta', '#budget']) {
      await api.server.clients.doc.send(
        new UpdateCommand({
          TableName: api.table,
          Key: { pk: runPartition(run.id), sk },
          UpdateExpression: 'SET expiresAt = :past',
          ExpressionAttributeValues: { ':past': past },
        }),
      );
    }
    expect((await api.gql(`query($id: ID!) { run(id: $id, consistent: true) { id } }`, { id: run.id })).data.run).toBeNull();
    const listed = (await api.gql(`{ runs(status: FAILED, first: 500) { edges { node { id } } } }`)).data.runs.edges.map(
      (e: { node: { id: string } }) => e.node.id,
    );
    expect(listed).not.toContain(run.id);
    const append = await api.gql(`mutation { appendEvent(input: { runId: "${run.id}", type: "late" }) { __typename } }`);
    expect(append.data.appendEvent.__typename).toBe('RunNotFound');
    // Its id stays taken until DynamoDB has deleted its rows: a new run must not see the old events.
    expect((await createRun({ id: run.id })).__typename).toBe('RunAlreadyExists');
  });
});

describe('runs(status, first, after)', () => {
  test('pages through 250 runs newest first, filtered by status, with no duplicates or omissions', async () => {
    const tenantRuns: { id: string; createdAt: string; status: string }[] = [];
    for (let i = 0; i < 250; i++) {
      const run = await createRun({ id: `list-${String(i).padStart(3, '0')}-${uniqueName('r')}` });
      const status = i % 3 === 0 ? 'AWAITING_APPROVAL' : 'RUNNING';
      if (status !== 'RUNNING') await transition({ runId: run.id, from: 'RUNNING', to: status });
      tenantRuns.push({ id: run.id, createdAt: run.createdAt, status });
    }
    const newestFirst = (runs: typeof tenantRuns) =>
      [...runs]
        .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1))
        .map((r) => r.id);
    const pageThrough = async (status: string | undefined, first: number) => {
      const ids: string[] = [];
      let after: string | null | undefined = null;
      for (let pages = 0; pages < 100; pages++) {
        const { data, errors }: GraphQLResponse<{ runs: RunsPage }> = await api.gql(
          `query($status: RunStatus, $first: Int, $after: String) { runs(status: $status, first: $first, after: $after) { edges { node { id status } } pageInfo { hasNextPage endCursor } } }`,
          { status, first, after },
        );
        if (errors) throw new Error(JSON.stringify(errors));
        const runs = data?.runs as RunsPage;
        ids.push(...runs.edges.map((e) => e.node.id));
        if (!runs.pageInfo.hasNextPage) return ids;
        after = runs.pageInfo.endCursor;
      }
      throw new Error('too many pages');
    };
    const mine = (ids: string[]) => ids.filter((id) => tenantRuns.some((r) => r.id === id));

    const awaiting = mine(await pageThrough('AWAITING_APPROVAL', 17));
    expect(awaiting).toEqual(newestFirst(tenantRuns.filter((r) => r.status === 'AWAITING_APPROVAL')));
    expect(new Set(awaiting).size).toBe(awaiting.length);

    const running = mine(await pageThrough('RUNNING', 50));
    expect(running).toEqual(newestFirst(tenantRuns.filter((r) => r.status === 'RUNNING')));

    const all = mine(await pageThrough(undefined, 33));
    expect(all).toEqual(newestFirst(tenantRuns));
  });

  test('a bad cursor or page size is refused naming it', async () => {
    expect((await api.gql(`{ runs(first: 501) { edges { cursor } } }`)).errors?.[0]?.message).toContain('first');
    expect((await api.gql(`{ runs(after: "bm9wZQ") { edges { cursor } } }`)).errors?.[0]?.message).toContain('after');
  });
});
