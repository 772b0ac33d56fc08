/**
 * `Run.events(types: [...])` over a long run whose few events of that type lie far apart: each
 * page sends a bounded number of Queries per event shard, and a page stopped at that bound
 * (however few events it found) lets the client go on where its read stopped, forward and
 * backward, until every event of the type is handed out once, in order.
 */
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { EVENT_PAGES_PER_SHARD } from '../../src/store/events/merge.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const EVENTS = 3003;
/** The run's only events of type "rare" (over 4 shards: 403 in shard 3, 1000 and 2200 in shard 0, 2405 in shard 1). */
const RARE = [403, 1000, 2200, 2405];

/**
 * Whether the run holds `seq`. Over several shards, shard 0 holds all of its seqs and the others
 * only the first and last few hundred: shard 0 is read to a seq far from where the others are,
 * and a page must not hand out what another shard holds past it.
 */
const held = (seq: number, shards: number) => shards === 1 || seq % shards === 0 || seq <= 600 || seq >= 2400;

/** Creates a run of `shards` event shards and writes its events straight into the table (the API would take minutes). */
async function runWith(shards: number, seqs: number[], event: (seq: number) => { type: string; payload: unknown }) {
  const runId = uniqueName('long');
  const created = await api.gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 't', budgetCap: 1000, eventShards: shards },
  });
  expect(created.data?.createRun?.__typename).toBe('Run');
  const createdAt = new Date().toISOString();
  const rows = seqs.map((seq) => ({ ...keys.event(OPEN_TENANT, runId, seq, shards), runId, seq, createdAt, ...event(seq) }));
  const batches = Array.from({ length: Math.ceil(rows.length / 25) }, (_, i) => rows.slice(i * 25, i * 25 + 25));
  for (let i = 0; i < batches.length; i += 8) {
    await Promise.all(
      batches.slice(i, i + 8).map(async (batch) => {
        let unprocessed = { [api.table]: batch.map((Item) => ({ PutRequest: { Item } })) } as Record<string, never[]> | undefined;
        while (unprocessed && Object.keys(unprocessed).length > 0) {
          const answer = await api.server.clients.doc.send(new BatchWriteCommand({ RequestItems: unprocessed }));
          unprocessed = answer.UnprocessedItems as typeof unprocessed;
        }
      }),
    );
  }
  return runId;
}

/** A run of `shards` event shards holding events 1..EVENTS (but for held's gaps), all of type "x" but RARE. */
const longRun = (shards: number) =>
  runWith(
    shards,
    Array.from({ length: EVENTS }, (_, i) => i + 1).filter((seq) => held(seq, shards)),
    (seq) => ({ type: RARE.includes(seq) ? 'rare' : 'x', payload: { n: seq } }),
  );

interface Page {
  edges: { cursor: string; node: { seq: number; type: string } }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

/** One page of the run's events of `type`, and the most Queries it sent to one shard (those filtered by type: not the run's own read). */
async function typedPage(runId: string, shards: number, type: string, args: string) {
  const from = api.requestInputs.length;
  const answer = await api.gql(
    `query($id: ID!) { run(id: $id) { events(types: ["${type}"], ${args}) { edges { cursor node { seq type } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`,
    { id: runId },
  );
  expect(answer.errors).toBeUndefined();
  const sent = api.requestInputs
    .slice(from)
    .filter(({ name, input }) => name === 'QueryCommand' && 'FilterExpression' in (input as object))
    .map(({ input }) => JSON.stringify(input));
  const perShard = keys.eventPartitions(OPEN_TENANT, runId, shards).map((pk) => sent.filter((input) => input.includes(`"${pk}"`)).length);
  return { page: answer.data.run.events as Page, queriesPerShard: Math.max(...perShard) };
}

/** Pages of `type` from the start (`first`, `after: endCursor`) or from the end (`last`, `before: startCursor`) until there are none. */
async function pageThrough(runId: string, shards: number, type: string, forward: boolean) {
  const pages: Page[] = [];
  let cursor: string | null = null;
  for (;;) {
    expect(pages.length, 'pages before there were no more').toBeLessThan(10);
    const args = forward ? `first: 3${cursor ? `, after: "${cursor}"` : ''}` : `last: 3${cursor ? `, before: "${cursor}"` : ''}`;
    const { page, queriesPerShard } = await typedPage(runId, shards, type, args);
    expect(queriesPerShard).toBeLessThanOrEqual(EVENT_PAGES_PER_SHARD);
    pages.push(page);
    if (!(forward ? page.pageInfo.hasNextPage : page.pageInfo.hasPreviousPage)) break;
    cursor = forward ? page.pageInfo.endCursor : page.pageInfo.startCursor;
    expect(cursor).not.toBeNull();
  }
  return { pages, seqs: (forward ? pages : [...pages].reverse()).flatMap((page) => page.edges.map((edge) => edge.node.seq)) };
}

/** A page that stopped with fewer events than asked, yet more to come. */
const short = (page: Page) => page.edges.length < 3 && (page.pageInfo.hasNextPage || page.pageInfo.hasPreviousPage);

describe.each([1, 4])('events(types) over a run of %i event shard(s)', (shards) => {
  let runId: string;
  beforeAll(async () => {
    runId = await longRun(shards);
  });

  test('forward: each page sends at most its Queries per shard; after endCursor, every rare event once, in order', async () => {
    const { pages, seqs } = await pageThrough(runId, shards, 'rare', true);
    expect(seqs).toEqual(RARE);
    expect(pages.some(short)).toBe(true);
  });

  test('backward: last/before startCursor hands out every rare event once, in order', async () => {
    const { pages, seqs } = await pageThrough(runId, shards, 'rare', false);
    expect(seqs).toEqual(RARE);
    expect(pages.some(short)).toBe(true);
  });

  test('a type the run never had: empty pages that go on from where their reads stopped, then end', async () => {
    for (const forward of [true, false]) {
      const { pages, seqs } = await pageThrough(runId, shards, 'absent', forward);
      expect(seqs).toEqual([]);
      expect(pages.length).toBeGreaterThan(1);
    }
  });

  test('an unfiltered page is whole, read as before', async () => {
    const all = await api.gql(
      `query($id: ID!) { run(id: $id) { events(first: 300, afterSeq: 2400) { edges { node { seq } } pageInfo { hasNextPage } } } }`,
      {
        id: runId,
      },
    );
    expect(all.data.run.events.edges.map((edge: { node: { seq: number } }) => edge.node.seq)).toEqual(
      Array.from({ length: 300 }, (_, i) => 2401 + i),
    );
    expect(all.data.run.events.pageInfo.hasNextPage).toBe(true);
  });
});

test('an unfiltered page of large events stops at its Queries too, and goes on after endCursor', async () => {
  // 80 events of 60 KB: about 17 to a Query's 1 MB, more than EVENT_PAGES_PER_SHARD Queries read.
  const runId = await runWith(
    1,
    Array.from({ length: 80 }, (_, i) => i + 1),
    () => ({ type: 'big', payload: 'x'.repeat(60_000) }),
  );
  const seqs: number[] = [];
  const sizes: number[] = [];
  let after = 'null';
  for (;;) {
    expect(sizes.length, 'pages before hasNextPage went false').toBeLessThan(10);
    const from = api.requestInputs.length;
    const answer = await api.gql(
      `query($id: ID!) { run(id: $id) { events(first: 80, afterSeq: 0, after: ${after}) { edges { node { seq } } pageInfo { hasNextPage endCursor } } } }`,
      { id: runId },
    );
    expect(answer.errors).toBeUndefined();
    const queries = api.requestInputs
      .slice(from)
      .filter(({ name, input }) => name === 'QueryCommand' && JSON.stringify(input).includes(runId));
    // The run's own Query, then the page's.
    expect(queries.length).toBeLessThanOrEqual(1 + EVENT_PAGES_PER_SHARD);
    const page = answer.data.run.events;
    sizes.push(page.edges.length);
    seqs.push(...page.edges.map((edge: { node: { seq: number } }) => edge.node.seq));
    if (!page.pageInfo.hasNextPage) break;
    after = `"${page.pageInfo.endCursor}"`;
  }
  expect(seqs).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
  expect(sizes[0]).toBeLessThan(80);
});
