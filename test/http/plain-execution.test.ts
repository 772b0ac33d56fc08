/**
 * Plain execution (plain-execution.ts) against hostile selections and events: every case
 * compares what a plan-enabled sharedExecution gives a client with what graphql-js's execute
 * makes, ending with a differential fuzz of random valid selections.
 */
import { execute, GraphQLNonNull, GraphQLObjectType, GraphQLScalarType, GraphQLSchema, GraphQLString, parse, validate } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DeliveredEvent } from '../../src/domain/run.ts';
import { sharedExecution } from '../../src/http/subscriptions/shared-execution.ts';
import { schema } from '../../src/schema/index.ts';
import { plainRead } from '../../src/schema/plain-read.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const at = new Date('2026-11-30T12:00:00.000Z');
const event = (extra: Partial<DeliveredEvent> = {}): DeliveredEvent => ({
  runId: 'r1',
  seq: 3,
  type: 'step',
  // biome-ignore lint/suspicious/noThenProperty: a payload that looks like a promise on purpose
  payload: { a: 1, then: 2 },
  createdAt: at,
  missingBefore: [{ from: 1, to: 2 }],
  late: true,
  ...extra,
});

const argsFor = (query: string, variables: Record<string, unknown> = {}, operationName?: string) => ({
  schema,
  document: parse(query),
  contextValue: {},
  variableValues: variables,
  operationName,
});

/** What the plan-enabled shared path hands a client, against graphql-js, as JSON (or the throw). */
async function compare(query: string, variables: Record<string, unknown>, payload: unknown, operationName?: string) {
  const args = argsFor(query, variables, operationName);
  let got: string;
  try {
    got = JSON.stringify(await sharedExecution(args, { plain: true })(payload));
  } catch (err) {
    got = `threw: ${(err as Error).message}`;
  }
  return { got, expected: JSON.stringify(await execute({ ...args, rootValue: payload })) };
}

describe('plain execution, hostile cases', () => {
  it('a scalar whose serialize returns null: the plan gives up, and graphql-js reports the error (in a non-null field too)', async () => {
    // Not reachable with this schema's scalars (JSON, DateTime and the built-ins never return null): graphql-js
    // refuses a serialized null as it does undefined (completeLeafValue: == null), and so does the plan.
    const Nullish = new GraphQLScalarType({ name: 'Nullish', serialize: (value) => (value === 'none' ? null : value) });
    const Thing = new GraphQLObjectType({
      name: 'Thing',
      fields: { v: { type: new GraphQLNonNull(Nullish) }, w: { type: Nullish } },
    });
    const custom = new GraphQLSchema({
      query: new GraphQLObjectType({ name: 'Query', fields: { x: { type: GraphQLString } } }),
      subscription: new GraphQLObjectType({
        name: 'Subscription',
        fields: { thing: { type: new GraphQLNonNull(Thing), resolve: (x: unknown) => x, extensions: plainRead } },
      }),
    });
    for (const query of ['subscription { thing { v } }', 'subscription { thing { w } }']) {
      const args = { schema: custom, document: parse(query), contextValue: {} };
      const payload = { v: 'none', w: 'none' };
      const got = JSON.stringify(await sharedExecution(args, { plain: true })(payload));
      expect(got).toBe(JSON.stringify(await execute({ ...args, rootValue: payload })));
    }
  });

  it('subscribers differing only in variables (directives) never share a result', async () => {
    const query = parse('subscription($a: Boolean!) { runEvents(runId: "r1") { seq type @include(if: $a) payload @skip(if: $a) } }');
    const payload = event();
    const [on, off] = await Promise.all(
      [true, false].map((a) =>
        sharedExecution(
          { schema, document: query, contextValue: { tenant: 't', role: 'read' }, variableValues: { a } },
          { plain: true },
        )(payload),
      ),
    );
    expect(on).not.toBe(off);
    expect(JSON.stringify(on)).toBe('{"data":{"runEvents":{"seq":3,"type":"step"}}}');
    expect(JSON.stringify(off)).toBe('{"data":{"runEvents":{"seq":3,"payload":{"a":1,"then":2}}}}');
  });

  it('explicit null for a defaulted variable in a nested @skip: the error result graphql-js makes, not a throw', async () => {
    const query = 'subscription($s: Boolean = false) { runEvents(runId: "r1") { seq type @skip(if: $s) } }';
    const { got, expected } = await compare(query, { s: null }, event());
    expect(expected).toContain('"errors"');
    expect(got).toBe(expected);
  });

  it.each<[string, string, Record<string, unknown>, string?]>([
    [
      'aliases named like Object.prototype',
      'subscription { __proto__: runEvents(runId: "r1") { constructor: seq toString: type __proto__: payload hasOwnProperty: __typename } }',
      {},
    ],
    [
      'merged fields, different sub-selections',
      'subscription { runEvents(runId: "r1") { missingBefore { from } ...F missingBefore { __typename to from } } } fragment F on Event { missingBefore { t: to } seq }',
      {},
    ],
    [
      'nested fragments, repeated, with skip/include by variables and defaults',
      'subscription($a: Boolean!, $b: Boolean = true) { runEvents(runId: "r1") { ...A ...A @skip(if: $a) ... @include(if: $b) { ...B } } } fragment A on Event { seq ...B @include(if: $a) } fragment B on Event { type missingBefore { ...C } } fragment C on SeqRange { from @skip(if: $b) to }',
      { a: true },
    ],
    [
      'skip on the first spread of a fragment, included later',
      'subscription { runEvents(runId: "r1") { ...A @skip(if: true) late ...A } } fragment A on Event { seq }',
      {},
    ],
    [
      'operation by name among several',
      'subscription A { runEvents(runId: "r1") { seq } } subscription B { runEvents(runId: "r1") { type late } } query C { __typename }',
      {},
      'B',
    ],
    ['fragment on Subscription at the root', 'subscription { ... on Subscription { runEvents(runId: "r1") { seq } } }', {}],
    [
      'typename everywhere',
      'subscription { runEvents(runId: "r1") { __typename t: __typename missingBefore { __typename } ... on Event { __typename } } }',
      {},
    ],
  ])('%s', async (_, query, variables, operationName) => {
    for (const payload of [event(), event({ missingBefore: [] }), event({ payload: null, late: undefined })]) {
      const { got, expected } = await compare(query, variables, payload, operationName);
      expect(got).toBe(expected);
    }
  });
});

const passThrough: Plugin = { onSubscribe: () => ({ onSubscribeResult: () => ({ onNext: () => undefined }) }) };

/** The frames after connection_ack: two events', or an error frame ending the subscription. */
async function framesOf(api: TestServer, query: string, variables: Record<string, unknown>) {
  const raw = await rawSocket(api.url);
  raw.subscribe('s', query, variables);
  await raw.until((frames) => frames.length >= 3 || frames.some((frame) => frame.type === 'error'), 'two frames');
  raw.close();
  return raw.frames.slice(1, 3).map((frame) => frame.message);
}

describe('over graphql-ws', () => {
  let staged: TestServer;
  let hooked: TestServer;
  beforeAll(async () => {
    [staged, hooked] = await Promise.all([startTestServer(), startTestServer({ plugins: [passThrough] })]);
  });

  it('explicit null for a defaulted variable in a nested @skip: the client gets what graphql-js makes', async () => {
    const query = 'subscription($runId: ID!, $s: Boolean = false) { runEvents(runId: $runId, afterSeq: 0) { seq type @skip(if: $s) } }';
    const [plain, graphqlJs] = await Promise.all(
      [staged, hooked].map(async (api) => framesOf(api, query, { runId: await newRun(api, { events: 2 }), s: null })),
    );
    expect(plain).toEqual(graphqlJs);
  });
});

// A differential fuzz: every (document, event) must come out of the plan-enabled path as graphql-js makes it.

let seed = 12345;
const rnd = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)] as T;
const dir = () =>
  pick([
    '',
    '',
    '',
    ' @skip(if: $a)',
    ' @include(if: $a)',
    ' @skip(if: $b)',
    ' @include(if: $b)',
    ' @skip(if: true)',
    ' @include(if: true)',
    ' @include(if: $a) @skip(if: $b)',
  ]);
function seqRange(): string {
  const parts: string[] = [];
  const n = 1 + Math.floor(rnd() * 3);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.7) {
      const f = pick(['from', 'to', '__typename']);
      parts.push(`${rnd() < 0.2 ? 'x: ' : ''}${f}${dir()}`);
    } else if (r < 0.85) parts.push(`... on SeqRange${dir()} { ${pick(['from', 'to'])} }`);
    else parts.push(`...R${dir()}`);
  }
  return parts.join(' ');
}
function eventSel(depth: number): string {
  const parts: string[] = [];
  const n = 1 + Math.floor(rnd() * 4);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.6) {
      const f = pick(['seq', 'type', 'payload', 'createdAt', 'runId', 'id', 'late', 'origin', '__typename', 'missingBefore']);
      const a = f === 'missingBefore' ? '' : rnd() < 0.2 ? `${pick(['x', 'y'])}: ` : '';
      parts.push(`${a}${f}${dir()}${f === 'missingBefore' ? ` { ${seqRange()} }` : ''}`);
    } else if (r < 0.8 && depth < 3) parts.push(`... ${rnd() < 0.5 ? 'on Event' : ''}${dir()} { ${eventSel(depth + 1)} }`);
    else parts.push(`...${pick(['E1', 'E2'])}${dir()}`);
  }
  return parts.join(' ');
}
const oddEvents = [
  { runId: 'r1', seq: 1, type: 'step', payload: { a: 1 }, createdAt: at },
  {
    runId: 'r1',
    seq: 2,
    type: 'x',
    payload: null,
    createdAt: at,
    missingBefore: [
      { from: 1, to: 1 },
      { from: 3, to: 4 },
    ],
    late: true,
  },
  { runId: 'r1', seq: 2.5, type: 'x', payload: [1], createdAt: at },
  { runId: 'r1', seq: 3, type: null, payload: 'p', createdAt: at },
  // biome-ignore lint/suspicious/noThenProperty: a payload that looks like a promise on purpose
  { runId: 'r1', seq: 4, type: 't', payload: { then: 1 }, createdAt: 'not a date' },
  { runId: 'r1', seq: 5, type: 't', payload: 1, createdAt: at, missingBefore: [{ from: 1, to: null }] },
  { runId: 'r1', seq: 6, type: 't', payload: 1, createdAt: at, missingBefore: [{ from: 1, to: 2 }, null] },
  { runId: 'r1', seq: 7, type: 't', payload: 1, createdAt: at, late: 'yes' },
  { runId: 7, seq: '8', type: 9, payload: 1, createdAt: at.toISOString(), late: 0 },
  { runId: 'r1', seq: 9, type: 'run.cancelled', payload: null, createdAt: at, origin: 'SERVER' },
  { runId: 'r1', seq: 10, type: 't', payload: null, createdAt: at, origin: 'server' },
];
it('held: random selections (aliases, fragments, inline fragments, @skip/@include by variables and defaults) against odd events', async () => {
  let ran = 0;
  for (let i = 0; i < 4000; i++) {
    const e1 = eventSel(1),
      e2 = eventSel(1),
      r = seqRange();
    let q = `subscription($a: Boolean!, $b: Boolean = ${pick(['true', 'false'])}) { ${rnd() < 0.3 ? 'ev: ' : ''}runEvents(runId: "r1") { ${eventSel(0)} __typename @skip(if: $a) @include(if: $b) } }`;
    for (let k = 0; k < 3; k++) {
      if (q.includes('...E1') && !q.includes('fragment E1')) q += ` fragment E1 on Event { ${e1} }`;
      if (q.includes('...E2') && !q.includes('fragment E2')) q += ` fragment E2 on Event { ${e2} }`;
      if (q.includes('...R') && !q.includes('fragment R')) q += ` fragment R on SeqRange { ${r} }`;
    }
    let doc: ReturnType<typeof parse>;
    try {
      doc = parse(q);
    } catch {
      continue;
    }
    if (validate(schema, doc).length) continue;
    const variables = { a: rnd() < 0.5, ...(rnd() < 0.5 ? { b: rnd() < 0.5 } : {}) };
    for (const ev of oddEvents) {
      const args = { schema, document: doc, contextValue: {}, variableValues: variables };
      const got = JSON.stringify(await sharedExecution(args, { plain: true })({ ...ev }));
      const exp = JSON.stringify(await execute({ ...args, rootValue: { ...ev } }));
      expect(got).toBe(exp);
      ran++;
    }
  }
  expect(ran).toBeGreaterThan(1000);
});
