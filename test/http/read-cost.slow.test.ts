/**
 * The cost the server computes for a query (http/cost.ts, with its own rules) is never lower
 * than the table requests executing it makes, over random documents built from the schema's
 * reading fields, against data that makes each field read as much as it can: a run of 16 event
 * shards with a rare event type on one of them, as many output streams as a run may have (and
 * more written around the API), a stream of many small chunks, claims, budgets and leases.
 * And every one of those requests went through the request's own meter: what the SDK sent and
 * what the meter counted are the same.
 */
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { type DocumentNode, parse } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { beforeAll, describe, expect, inject, test } from 'vitest';
import { putRows } from '../../bench/hostile/rows.ts';
import { loadConfig } from '../../src/config.ts';
import { MAX_EVENT_SHARDS } from '../../src/domain/limits.ts';
import { costRules } from '../../src/http/app.ts';
import { checkCost } from '../../src/http/cost.ts';
import type { Context } from '../../src/schema/context.ts';
import { eventCursor } from '../../src/schema/event.ts';
import { schema } from '../../src/schema/index.ts';
import type { RequestReads } from '../../src/store/index.ts';
import { eventItem, outputChunkItem, outputStreamItem } from '../../src/table/codec.ts';
import { dynamoClient } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const TENANT = 'readcost';
const KEY = 'read-cost-key-0123456789';
const HEAVY = 'heavy';
/** Events of the heavy run: past 4 pages of 32 rows on every shard, so a filtered page reads each shard out. */
const EVENTS = 2_200;
/** Output streams written around the API: more than a run may have (64 by default). */
const STREAMS = 70;
/** Chunks of one stream: more than one read of its text takes (8 pages of 100). */
const CHUNKS = 900;
const LIGHT_RUNS = 8;
const UNITS = 6;
const READ_COMMANDS = new Set([
  'GetItemCommand',
  'GetCommand',
  'QueryCommand',
  'ScanCommand',
  'BatchGetItemCommand',
  'BatchGetCommand',
  'TransactGetItemsCommand',
  'TransactGetCommand',
]);

let api: TestServer;
/** The meter of the request executed last (each request is sent alone). */
let lastMeter: RequestReads | undefined;
const meters: Plugin = {
  onExecute({ args }) {
    lastMeter = (args.contextValue as unknown as Context).reads;
  },
};
const gql = (query: string) => api.gql(query, {}, { key: KEY });
const rules = () =>
  costRules(
    loadConfig({ AWS_ENDPOINT_URL_DYNAMODB: inject('dynamodbEndpoint'), RUNPLANE_TABLE: api.table, RUNPLANE_API_KEYS: `${KEY}=${TENANT}` })
      .limits,
  );

const writeAll = (items: Record<string, unknown>[]) => putRows(DynamoDBDocumentClient.from(dynamoClient()), api.table, items);

async function must(query: string, field: string, typename: string) {
  const answer = await gql(query);
  expect(answer.data?.[field]?.__typename, JSON.stringify(answer)).toBe(typename);
}

beforeAll(async () => {
  api = await startTestServer({ env: { RUNPLANE_API_KEYS: `${KEY}=${TENANT}` }, plugins: [meters] });
  await must(
    `mutation { createRun(input: { id: "${HEAVY}", task: "t", budgetCap: 100, eventShards: ${MAX_EVENT_SHARDS} }) { __typename } }`,
    'createRun',
    'Run',
  );
  await must(`mutation { claimRun(input: { runId: "${HEAVY}", holder: "w", ttlSeconds: 600 }) { __typename } }`, 'claimRun', 'RunClaim');
  const at = new Date();
  // Written around the API, for speed: the rows the API writes, by the table's own codec.
  const events = Array.from({ length: EVENTS }, (_, i) => {
    const seq = i + 1;
    // Only on one shard, near the end: a filter for it drops all that every shard's first pages hold.
    const type = seq % MAX_EVENT_SHARDS === 3 && seq > EVENTS - 100 ? 'rare' : 'step';
    return eventItem(TENANT, { runId: HEAVY, seq, type, payload: { seq }, createdAt: at }, 'w', MAX_EVENT_SHARDS);
  });
  const streams = Array.from({ length: STREAMS }, (_, i) => `o${String(i).padStart(2, '0')}`);
  await writeAll([
    ...events,
    ...streams.flatMap((stream) => [
      outputStreamItem(TENANT, HEAVY, stream, at),
      outputChunkItem(TENANT, { runId: HEAVY, stream, offset: 0, text: 'x', final: false }, at),
    ]),
    outputStreamItem(TENANT, HEAVY, 'many', at),
    ...Array.from({ length: CHUNKS }, (_, offset) =>
      outputChunkItem(TENANT, { runId: HEAVY, stream: 'many', offset, text: 'y', final: false }, at),
    ),
  ]);
  // Each run and lease set up alone, all of them at once.
  const light = Array.from({ length: LIGHT_RUNS }, async (_, i) => {
    const id = `light-${i}`;
    await must(
      `mutation { createRun(input: { id: "${id}", task: "t", budgetCap: 100, eventShards: ${[1, 4, 16][i % 3]} }) { __typename } }`,
      'createRun',
      'Run',
    );
    for (let e = 0; e < i; e++)
      await must(`mutation { appendEvent(input: { runId: "${id}", type: "step", cost: 1 }) { __typename } }`, 'appendEvent', 'Event');
    if (i % 2 === 0)
      await must(`mutation { claimRun(input: { runId: "${id}", holder: "w", ttlSeconds: 600 }) { __typename } }`, 'claimRun', 'RunClaim');
  });
  const units = Array.from({ length: UNITS }, async (_, u) => {
    const acquired = await gql(
      `mutation { acquireLease(input: { unitId: "unit-${u}", owner: "w", ttlSeconds: 600 }) { __typename ... on Lease { token } } }`,
    );
    expect(acquired.data?.acquireLease?.__typename).toBe('Lease');
    if (u % 2 === 1)
      await must(
        `mutation { releaseLease(input: { unitId: "unit-${u}", owner: "w", token: ${acquired.data.acquireLease.token} }) { __typename } }`,
        'releaseLease',
        'Lease',
      );
  });
  await Promise.all([...light, ...units]);
  // The listing index is eventually consistent: every run listed before the documents run.
  await waitFor(async () => (await gql('{ runs(first: 50) { edges { cursor } } }')).data?.runs?.edges?.length === LIGHT_RUNS + 1, {
    what: 'every run to be listed',
  });
}, 120_000);

// Documents -----------------------------------------------------------------------------------

const pick = <T>(...values: T[]) => fc.constantFrom(...values);
/** Arguments, some left out: `name: value` joined, or nothing. */
const args = (...parts: fc.Arbitrary<string | undefined>[]) =>
  fc.tuple(...parts).map((given) => {
    const present = given.filter((part): part is string => part !== undefined);
    return present.length ? `(${present.join(', ')})` : '';
  });
/** `arbitrary` or nothing; given `weight` times as often as not. */
const maybe = (arbitrary: fc.Arbitrary<string>, weight = 1) =>
  fc.oneof({ weight, arbitrary }, { weight: 1, arbitrary: fc.constant(undefined) });
/** One to three copies of a field, each but the first under an alias of its own (the field's name and a number). */
const aliased = (field: fc.Arbitrary<string>) =>
  fc
    .array(field, { minLength: 1, maxLength: 3 })
    .map((copies) => copies.map((copy, i) => (i === 0 ? copy : `${/^\w+/.exec(copy)?.[0]}${i}: ${copy}`)).join(' '));
/** Some of `fields` (few: a field's reads stand out against a small selection's cost). */
const some = (fields: fc.Arbitrary<string>[], most = fields.length) =>
  fc
    .subarray(fields, { minLength: 1, maxLength: most })
    .chain((chosen) => fc.tuple(...chosen))
    .map((parts) => parts.join(' '));

const eventFields = some([pick('seq'), pick('type'), pick('payload'), pick('origin'), pick('missingBefore { from to }')]);
const events = fc
  .tuple(
    args(
      maybe(pick('first: 0', 'first: 1', 'first: 7', 'last: 3', 'first: 100', 'first: 500', 'last: 200'), 3),
      maybe(pick('afterSeq: 0', 'afterSeq: 500', 'afterSeq: 2190')),
      maybe(pick('types: ["rare"]', 'types: ["step"]', 'types: ["none"]', 'types: ["none", "rare"]'), 3),
      maybe(pick(`after: "${eventCursor(40)}"`, `before: "${eventCursor(2000)}"`)),
    ),
    some([eventFields.map((f) => `edges { cursor node { ${f} } }`), pick('pageInfo { hasNextPage hasPreviousPage endCursor }')]),
  )
  .map(([a, selection]) => `events${a} { ${selection} }`);
const runFields = some(
  [
    pick('id', 'status', 'eventShards', 'version', 'task'),
    pick('budget { spent cap remaining }', 'budget { version }'),
    pick('claim { token holder expiresAt }'),
    pick('lastSeq'),
    aliased(events),
    aliased(pick('outputs { stream length final }')),
    aliased(
      fc
        .tuple(pick('"many"', '"o01"', '"none"'), pick('', ', afterOffset: 0', ', afterOffset: 5', ', afterOffset: 850'))
        .map(([stream, offset]) => `output(stream: ${stream}${offset}) { text offset final }`),
    ),
  ],
  2,
);
/** A Run's selection: written out, in an inline fragment, or in a named fragment (defined once per document). */
const runSelection = fc
  .tuple(runFields, pick('plain', 'inline', 'named'))
  .map(([fields, how]) =>
    how === 'plain'
      ? { selection: fields, fragment: undefined }
      : how === 'inline'
        ? { selection: `... on Run { ${fields} }`, fragment: undefined }
        : { selection: '...RunBits', fragment: fields },
  );
const runIds = pick(HEAVY, HEAVY, 'light-2', 'light-7', 'missing');
const roots = fc.array(
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(runIds, pick('', ', consistent: true'), runSelection)
        .map(([id, consistent, run]) => ({ field: `run(id: "${id}"${consistent}) { ${run.selection} }`, fragment: run.fragment })),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(pick('first: 0', 'first: 1', 'first: 3', 'first: 9'), pick('', ', status: RUNNING'), runSelection)
        .map(([first, status, run]) => ({
          field: `runs(${first}${status}) { edges { cursor node { ${run.selection} } } pageInfo { hasNextPage } }`,
          fragment: run.fragment,
        })),
    },
    pick('lease(unitId: "unit-0") { token owner expiresAt }', 'lease(unitId: "unit-1") { token }').map((field) => ({
      field,
      fragment: undefined,
    })),
    fc.tuple(pick('first: 0', 'first: 2', 'first: 10'), pick('', ', held: true', ', held: false')).map(([first, held]) => ({
      field: `leases(${first}${held}) { edges { node { unitId token } } pageInfo { hasNextPage } }`,
      fragment: undefined,
    })),
    pick({ field: 'viewer { tenant canWrite }', fragment: undefined }),
  ),
  { minLength: 1, maxLength: 2 },
);
/** A document: its root fields under aliases of their own (`q0`, `q1`, ...), with its named fragment if one is used. */
const documents = roots.map((fields) => {
  const fragment = fields.find((f) => f.fragment)?.fragment;
  const body = fields.map((f, i) => `q${i}: ${f.field.replace('...RunBits', fragment ? '...RunBits' : '__typename')}`).join('\n');
  return `{ ${body} }${fragment ? `\nfragment RunBits on Run { ${fragment} }` : ''}`;
});

// The property --------------------------------------------------------------------------------

/** What executing `query` made: table requests of this tenant (as the SDK sent them), and as the request's meter counted them. */
async function readsOf(query: string) {
  lastMeter = undefined;
  const from = api.requestInputs.length;
  const answer = await gql(query);
  const sent = api.requestInputs
    .slice(from)
    .filter(({ name, input }) => READ_COMMANDS.has(name) && JSON.stringify(input).includes(`"${TENANT}#`));
  // Set by the plugin while the request ran.
  const meter = lastMeter as RequestReads | undefined;
  return { answer, sent: sent.length, metered: meter?.made, commands: sent.map((r) => r.name) };
}

function costOf(document: DocumentNode) {
  try {
    return checkCost(schema, document, undefined, {}, rules());
  } catch (err) {
    return (err as { extensions?: { code?: string } }).extensions?.code ?? String(err);
  }
}

describe('the cost of a query bounds its table requests', () => {
  test('random documents over run, runs, lease, leases and viewer: requests <= cost, and each one metered', async () => {
    let executed = 0;
    await fc.assert(
      fc.asyncProperty(documents, async (query) => {
        const cost = costOf(parse(query));
        const { answer, sent, metered, commands } = await readsOf(query);
        const seen = `${query}\ncost ${cost}, ${sent} table requests (${commands.join(' ')}), metered ${metered}, answer ${JSON.stringify(answer.errors ?? 'data')}`;
        if (typeof cost !== 'number') {
          // Refused before it runs, by the server as here: nothing read.
          expect(answer.errors?.[0]?.extensions?.code, seen).toBe(cost);
          expect(sent, seen).toBe(0);
          return;
        }
        executed++;
        expect(answer.errors?.filter((e) => e.extensions?.code !== 'LIMIT_EXCEEDED') ?? [], seen).toEqual([]);
        expect(sent, seen).toBeLessThanOrEqual(cost);
        expect(metered, seen).toBe(sent);
      }),
      { numRuns: 30 },
    );
    // Most documents ran (a cost limit refusing them all would prove nothing).
    expect(executed).toBeGreaterThan(15);
  }, 120_000);
});
