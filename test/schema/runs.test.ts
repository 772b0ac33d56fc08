import { BatchWriteCommand, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LISTING_PAGES_PER_SHARD, LISTING_SHARDS } from '../../src/store/listing-pages.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { ownEngine } from '../support/engine.ts';
import { OPEN_TENANT } from '../support/runs.ts';
import { type GraphQLResponse, startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const CREATE = `mutation($input: CreateRunInput!) {
  createRun(input: $input) {
    __typename
    ... on Run { id task status version lastSeq budget { runId cap spent remaining } }
    ... on RunAlreadyExists { message runId }
  }
}`;
const TRANSITION = `mutation($input: TransitionRunInput!) {
  transitionRun(input: $input) {
    __typename
    ... on Run { id status version }
    ... on StatusConflict { message runId expected current }
    ... on RunNotFound { message runId }
  }
}`;
const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }`;

async function createRun(input: Record<string, unknown> = {}) {
  const id = uniqueName('run');
  const { data } = await api.gql(CREATE, { input: { id, task: 'audit checkout', budgetCap: 1000, ...input } });
  return data.createRun;
}

describe('createRun', () => {
  test('creates the run RUNNING at version 1 with its budget', async () => {
    const run = await createRun({ budgetCap: 500 });
    expect(run).toMatchObject({ __typename: 'Run', task: 'audit checkout', status: 'RUNNING', version: 1, lastSeq: 0 });
    expect(run.budget).toEqual({ runId: run.id, cap: 500, spent: 0, remaining: 500 });
  });

  test('makes an id when none is given', async () => {
    const { data } = await api.gql(CREATE, { input: { task: 't', budgetCap: 1 } });
    expect(data.createRun.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('a second create with the same id is RunAlreadyExists and changes nothing', async () => {
    const run = await createRun({ task: 'first', budgetCap: 10 });
    const { data } = await api.gql(CREATE, { input: { id: run.id, task: 'second', budgetCap: 99 } });
    expect(data.createRun).toEqual({ __typename: 'RunAlreadyExists', runId: run.id, message: `run ${run.id} already exists` });
    const read = await api.gql(`query($id: ID!) { run(id: $id) { task budget { cap } } }`, { id: run.id });
    expect(read.data.run).toEqual({ task: 'first', budget: { cap: 10 } });
  });

  test.each([
    [{ id: 'a#b' }, 'input.id'],
    [{ id: 'x\u0000' }, 'input.id'],
    [{ id: 'x'.repeat(129) }, 'input.id'],
    [{ id: '-leading-dash' }, 'input.id'],
    [{ task: '' }, 'input.task'],
    [{ task: 'bell\u0007' }, 'input.task'],
    [{ budgetCap: -1 }, 'input.budgetCap'],
  ])('bad input %j is refused naming %s, and nothing is written', async (bad, field) => {
    const id = (bad as { id?: string }).id ?? uniqueName('run');
    const response = await api.gql(CREATE, { input: { id, task: 'ok', budgetCap: 1, ...bad } });
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(response.errors?.[0]?.message).toContain(field);
    const { Items } = await api.server.clients.doc.send(
      new QueryCommand({
        TableName: api.table,
        KeyConditionExpression: 'pk = :pk',
        // Spelled out on purpose: the table's key functions refuse such an id, which is the point.
        ExpressionAttributeValues: { ':pk': `${OPEN_TENANT}#run#${id}` },
      }),
    );
    expect(Items).toEqual([]);
  });

  test('budgetCap beyond a 32-bit Int is refused by GraphQL itself', async () => {
    const response = await api.gql(CREATE, { input: { task: 't', budgetCap: 2 ** 31 } });
    expect(response.errors?.[0]?.message).toMatch(/Int cannot represent/);
  });
});

describe('run(id)', () => {
  test('is null for a run that does not exist', async () => {
    const { data } = await api.gql(`query($id: ID!) { run(id: $id) { id } }`, { id: uniqueName('absent') });
    expect(data.run).toBeNull();
  });

  test('a malformed id is a BAD_USER_INPUT error', async () => {
    const response = await api.gql(`query { run(id: "a#b") { id } }`);
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });

  test('a variable GraphQL itself refuses (wrong type, missing, out of range) is BAD_USER_INPUT, with HTTP 400', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['query($id: ID!) { run(id: $id) { id } }', { id: { a: 1 } }, /\$id.*ID cannot represent/],
      ['query($id: ID!) { run(id: $id) { id } }', {}, /\$id.*was not provided/],
      [CREATE, { input: { task: 't', budgetCap: 2 ** 31 } }, /input\.budgetCap.*Int cannot represent/],
    ];
    for (const [query, variables, message] of cases) {
      const response = await fetch(api.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      expect(response.status).toBe(400);
      const { errors } = (await response.json()) as { errors: { message: string; extensions?: { code?: string } }[] };
      expect(errors).toHaveLength(1);
      expect(errors[0]?.message).toMatch(message);
      expect(errors[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    }
    // Past 50 such errors graphql-js stops, with one more error saying so: that one too.
    const many = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'query($id: ID!, $t: [String!]) { run(id: $id) { events(types: $t) { edges { cursor } } } }',
        variables: { id: 'r', t: Array.from({ length: 55 }, (_, i) => i) },
      }),
    });
    const { errors } = (await many.json()) as { errors: { message: string; extensions?: { code?: string } }[] };
    expect(errors.length).toBeGreaterThan(50);
    expect(errors.every((e) => e.extensions?.code === 'BAD_USER_INPUT')).toBe(true);
  });

  test('null through a variable with a default into a non-null argument is a field error, BAD_USER_INPUT too', async () => {
    const response = await api.gql('query($id: ID = "x") { run(id: $id) { id } }', { id: null });
    expect(response.data).toEqual({ run: null });
    expect(response.errors?.[0]).toMatchObject({
      message: 'Argument "id" of non-null type "ID!" must not be null.',
      path: ['run'],
      extensions: { code: 'BAD_USER_INPUT' },
    });
  });

  test('metadata, budget and the first page of events cost exactly one DynamoDB request', async () => {
    const run = await createRun();
    for (let i = 0; i < 3; i++) await api.gql(APPEND, { input: { runId: run.id, type: 'step' } });
    const before = api.requestInputs.length;
    const { data } = await api.gql(
      `query($id: ID!) { run(id: $id) { id task status version createdAt updatedAt lastSeq budget { cap spent remaining } events(first: 10) { edges { cursor node { seq type payload createdAt } } pageInfo { hasNextPage endCursor } } } }`,
      { id: run.id },
    );
    // This request's own (the server's background work may read the table meanwhile).
    const own = api.requestInputs.slice(before).filter((r) => JSON.stringify(r.input).includes(run.id));
    expect(own.map((r) => r.name)).toEqual(['QueryCommand']);
    expect(data.run.events.edges.map((e: { node: { seq: number } }) => e.node.seq)).toEqual([1, 2, 3]);
    expect(data.run.lastSeq).toBe(3);
    expect(data.run.events.pageInfo.hasNextPage).toBe(false);
  });

  test('events page by cursor forward and backward, after a seq, and by type', async () => {
    const run = await createRun();
    for (let i = 1; i <= 7; i++) await api.gql(APPEND, { input: { runId: run.id, type: i % 2 ? 'odd' : 'even' } });
    const page = async (args: string) =>
      (
        await api.gql(
          `query($id: ID!) { run(id: $id) { events(${args}) { edges { cursor node { seq } } pageInfo { hasNextPage hasPreviousPage endCursor startCursor } } } }`,
          { id: run.id },
        )
      ).data.run.events;
    const seqs = (p: { edges: { node: { seq: number } }[] }) => p.edges.map((e) => e.node.seq);

    const first = await page('first: 3');
    expect(seqs(first)).toEqual([1, 2, 3]);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const second = await page(`first: 3, after: "${first.pageInfo.endCursor}"`);
    expect(seqs(second)).toEqual([4, 5, 6]);
    expect(second.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    const third = await page(`first: 3, after: "${second.pageInfo.endCursor}"`);
    expect(seqs(third)).toEqual([7]);
    expect(third.pageInfo.hasNextPage).toBe(false);

    const last = await page('last: 2');
    expect(seqs(last)).toEqual([6, 7]);
    expect(last.pageInfo.hasPreviousPage).toBe(true);
    expect(seqs(await page(`last: 2, before: "${last.pageInfo.startCursor}"`))).toEqual([4, 5]);

    expect(seqs(await page('afterSeq: 5'))).toEqual([6, 7]);
    expect(seqs(await page('types: ["even"]'))).toEqual([2, 4, 6]);
    expect(seqs(await page('types: ["odd"], first: 2, afterSeq: 1'))).toEqual([3, 5]);
  });

  test('lastSeq of a run longer than the first page is still exact', async () => {
    const run = await createRun();
    for (let i = 0; i < 55; i++) await api.gql(APPEND, { input: { runId: run.id, type: 'step' } });
    const { data } = await api.gql(
      `query($id: ID!) { run(id: $id, consistent: true) { lastSeq events { edges { node { seq } } pageInfo { hasNextPage } } } }`,
      {
        id: run.id,
      },
    );
    expect(data.run.lastSeq).toBe(55);
    expect(data.run.events.edges).toHaveLength(50);
    expect(data.run.events.pageInfo.hasNextPage).toBe(true);
  });

  test.each([
    ['first: -1', 'events.first'],
    ['first: 501', 'events.first'],
    ['first: 1, last: 1', 'first or last'],
    ['after: "bm9wZQ"', 'events.after'],
    [`before: "${Buffer.from('seq:3000000000').toString('base64url')}"`, 'events.before'],
    ['types: ["a#b"]', 'types'],
  ])('events(%s) is refused naming %s', async (args, named) => {
    const run = await createRun();
    const response = await api.gql(`query($id: ID!) { run(id: $id) { events(${args}) { edges { cursor } } } }`, { id: run.id });
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(response.errors?.[0]?.message).toContain(named);
  });
});

describe('transitionRun', () => {
  test('moves from the expected status and bumps the version', async () => {
    const run = await createRun();
    const { data } = await api.gql(TRANSITION, { input: { runId: run.id, from: 'RUNNING', to: 'WAITING_FOR_TOOL' } });
    expect(data.transitionRun).toEqual({ __typename: 'Run', id: run.id, status: 'WAITING_FOR_TOOL', version: 2 });
    const back = await api.gql(TRANSITION, { input: { runId: run.id, from: 'WAITING_FOR_TOOL', to: 'RUNNING' } });
    expect(back.data.transitionRun.version).toBe(3);
  });

  test('from a status the run is no longer in is StatusConflict with the current status, and changes nothing', async () => {
    const run = await createRun();
    await api.gql(TRANSITION, { input: { runId: run.id, from: 'RUNNING', to: 'AWAITING_APPROVAL' } });
    const { data } = await api.gql(TRANSITION, { input: { runId: run.id, from: 'RUNNING', to: 'COMPLETED' } });
    expect(data.transitionRun).toMatchObject({
      __typename: 'StatusConflict',
      runId: run.id,
      expected: 'RUNNING',
      current: 'AWAITING_APPROVAL',
    });
    const { Item } = await api.server.clients.doc.send(
      new GetCommand({ TableName: api.table, Key: keys.run(OPEN_TENANT, run.id), ConsistentRead: true }),
    );
    expect(Item).toMatchObject({ status: 'AWAITING_APPROVAL', version: 2 });
  });

  test('a missing run is RunNotFound', async () => {
    const runId = uniqueName('absent');
    const { data } = await api.gql(TRANSITION, { input: { runId, from: 'RUNNING', to: 'COMPLETED' } });
    expect(data.transitionRun).toEqual({ __typename: 'RunNotFound', runId, message: `run ${runId} does not exist` });
  });

  test('an illegal transition is refused before any write, naming the rule', async () => {
    const run = await createRun();
    await api.gql(TRANSITION, { input: { runId: run.id, from: 'RUNNING', to: 'COMPLETED' } });
    const response = await api.gql(TRANSITION, { input: { runId: run.id, from: 'COMPLETED', to: 'RUNNING' } });
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(response.errors?.[0]?.message).toContain('COMPLETED is terminal');
    const sideways = await api.gql(TRANSITION, { input: { runId: run.id, from: 'WAITING_FOR_TOOL', to: 'AWAITING_APPROVAL' } });
    expect(sideways.errors?.[0]?.message).toContain('from WAITING_FOR_TOOL a run may go to RUNNING, FAILED, CANCELLED');
  });

  test('two concurrent transitions from one status: exactly one wins', async () => {
    const run = await createRun();
    const results = await Promise.all(
      ['COMPLETED', 'FAILED', 'CANCELLED', 'WAITING_FOR_TOOL'].map(
        async (to) => (await api.gql(TRANSITION, { input: { runId: run.id, from: 'RUNNING', to } })).data.transitionRun.__typename,
      ),
    );
    expect(results.filter((r) => r === 'Run')).toHaveLength(1);
    expect(results.filter((r) => r === 'StatusConflict')).toHaveLength(3);
  });
});

interface RunsPage {
  edges: { node: { id: string } }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

describe('runs(first, status) among runs past their retention that DynamoDB has not deleted yet', () => {
  let own: TestServer;
  const live: string[] = [];
  beforeAll(async () => {
    // An engine whose TTL deletes an item an hour after it expired, as DynamoDB does late.
    const { engine } = await ownEngine({ ttlDeleteDelayMs: 3_600_000 });
    afterAll(() => engine.close());
    own = await startTestServer({ endpoint: engine.endpoint });
    const template = await own.gql(CREATE, { input: { id: uniqueName('template'), task: 't', budgetCap: 10 } });
    const templateId = template.data.createRun.id;
    const { Item: row = {} } = await own.server.clients.doc.send(
      new GetCommand({ TableName: own.table, Key: keys.run(OPEN_TENANT, templateId) }),
    );
    const now = Math.floor(Date.now() / 1000);
    const start = Date.now() - 3_600_000;
    // 3 finished runs kept, among 2,000 past their retention (the template is one of these too); the newest 1,300 all past it.
    const rows = Array.from({ length: 2003 }, (_, i) => {
      const kept = [300, 500, 700].includes(i);
      const id = i === 0 ? templateId : `${kept ? 'kept' : 'gone'}-${String(i).padStart(4, '0')}-${uniqueName('r')}`;
      const createdAt = new Date(start + i * 1000).toISOString();
      if (kept) live.unshift(id);
      return {
        ...row,
        ...keys.run(OPEN_TENANT, id),
        ...keys.runListing(OPEN_TENANT, id, 'COMPLETED', createdAt),
        runId: id,
        status: 'COMPLETED',
        createdAt,
        updatedAt: createdAt,
        expiresAt: kept ? now + 86_400 : now - 86_400,
      };
    });
    for (let i = 0; i < rows.length; i += 200) {
      await Promise.all(
        Array.from({ length: 8 }, (_, j) => rows.slice(i + j * 25, i + j * 25 + 25)).map(async (batch) => {
          let unprocessed: Record<string, never[]> | undefined = {
            [own.table]: batch.map((Item) => ({ PutRequest: { Item } })) as never[],
          };
          while (batch.length > 0 && unprocessed && Object.keys(unprocessed).length > 0) {
            const answer = await own.server.clients.doc.send(new BatchWriteCommand({ RequestItems: unprocessed }));
            unprocessed = answer.UnprocessedItems as typeof unprocessed;
          }
        }),
      );
    }
  });

  test.each([[''], ['status: COMPLETED, ']])(
    'runs(%sfirst: 2): a bounded few Queries per shard a page; by endCursor, the 3 kept runs once, newest first',
    async (status) => {
      const seen: string[] = [];
      const sizes: number[] = [];
      let after: string | null = null;
      for (;;) {
        expect(sizes.length, 'pages before hasNextPage went false').toBeLessThan(20);
        const from = own.requestInputs.length;
        const answer: GraphQLResponse<{ runs: RunsPage }> = await own.gql(
          `query($after: String) { runs(${status}first: 2, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`,
          { after },
        );
        expect(answer.errors).toBeUndefined();
        // The listing's Queries (not the server's own reads of other index partitions, as the stall watcher's).
        const listing = keys.runShard(OPEN_TENANT, 0).slice(0, -1);
        const queries = own.requestInputs
          .slice(from)
          .filter(({ name, input }) => name === 'QueryCommand' && JSON.stringify(input).includes(listing));
        expect(queries.length).toBeLessThanOrEqual(LISTING_SHARDS * LISTING_PAGES_PER_SHARD);
        const page = answer.data?.runs as RunsPage;
        sizes.push(page.edges.length);
        seen.push(...page.edges.map((edge) => edge.node.id));
        if (!page.pageInfo.hasNextPage) break;
        expect(page.pageInfo.endCursor).not.toBeNull();
        after = page.pageInfo.endCursor;
      }
      expect(seen).toEqual(live);
      // The first page's reads ran out among expired runs only: empty, yet the listing went on.
      expect(sizes[0]).toBe(0);
    },
  );
});
