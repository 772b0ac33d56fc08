/**
 * Subscription results are executed once per event for every subscriber asking alike: what a
 * client gets must be what graphql-js makes of the same event, selection for selection, errors
 * included, and the second subscriber gets the very result the first did.
 */
import { execute, parse } from 'graphql';
import { beforeEach, describe, expect, it } from 'vitest';
import type { DeliveredEvent, Lease } from '../../src/domain/run.ts';
import { planResults } from '../../src/http/subscriptions/plain-execution.ts';
import { sharedExecution } from '../../src/http/subscriptions/shared-execution.ts';
import { schema } from '../../src/schema/index.ts';

const at = new Date('2026-11-30T12:00:00.000Z');
const events: DeliveredEvent[] = [
  { runId: 'r1', seq: 1, type: 'step', payload: { text: 'a step', n: 1.5, list: [1, 'two', null, { deep: true }] }, createdAt: at },
  { runId: 'r1', seq: 7, type: 'tool', payload: null, createdAt: at, missingBefore: [{ from: 5, to: 6 }] },
  { runId: 'r1', seq: 5, type: 'step', payload: 'just a string', createdAt: at, late: true },
  // Keys that are names of Object.prototype's own, and characters that matter in generated code.
  {
    runId: 'r1',
    seq: 8,
    type: 'odd',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a hostile value on purpose
    payload: { constructor: { name: 'Set' }, __proto__x: 1, toString: 'no', '"); throw 1; //': '`${1}`' },
    createdAt: at,
  },
  // A payload graphql-js must not take for a promise, and numbers at the edges of Int.
  // biome-ignore lint/suspicious/noThenProperty: a payload that looks like a promise on purpose
  { runId: 'r1', seq: 2 ** 31 - 1, type: 'then', payload: { then: 'not a promise', big: 2 ** 60 }, createdAt: at, missingBefore: [] },
];

const lease: Lease & { version: number } = {
  unitId: 'unit-7',
  owner: 'worker-1',
  token: 12,
  acquiredAt: at,
  expiresAt: new Date(at.getTime() + 30_000),
  version: 3,
};

const eventSelections: [string, Record<string, unknown>][] = [
  [
    'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq type payload createdAt runId id late missingBefore { from to } } }',
    {},
  ],
  ['subscription { runEvents(runId: "r1") { __typename first: seq second: seq ...E } } fragment E on Event { type payload }', {}],
  [
    'subscription($id: ID!, $withPayload: Boolean!, $skipType: Boolean = true) { runEvents(runId: $id) { seq payload @include(if: $withPayload) type @skip(if: $skipType) } }',
    { withPayload: false },
  ],
  [
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a hostile literal on purpose
    'subscription { runEvents(runId: "a\\"); process.exit(1); (\\"", types: ["`${process.exit(1)}`"]) { ... on Event { seq q: __typename } } }',
    {},
  ],
  ['subscription Named { runEvents(runId: "r1") { seq } } subscription Other { runEvents(runId: "r1") { type } }', {}],
];

/** Whether events may be resolved by plans (plain-execution.ts): every test runs both ways. */
let plain = false;

async function both(query: string, variables: Record<string, unknown>, rootValue: unknown, operationName?: string) {
  const args = { schema, document: parse(query), rootValue, contextValue: {}, variableValues: { id: 'r1', ...variables }, operationName };
  const shared = sharedExecution(args, { plain });
  const first = await shared(rootValue);
  // Another subscriber asking alike is handed the same result, not a second execution.
  if (typeof rootValue === 'object' && rootValue !== null) expect(await shared(rootValue)).toBe(first);
  return { got: JSON.stringify(first), expected: JSON.stringify(await execute(args)) };
}

describe.each([false, true])('shared subscription execution (plain: %s)', (withPlans) => {
  beforeEach(() => {
    plain = withPlans;
  });

  it.each(eventSelections)('runEvents %s: the same result as graphql-js for every kind of event', async (query, variables) => {
    const operationName = query.includes('subscription Named') ? 'Other' : undefined;
    for (const event of events) {
      const { got, expected } = await both(query, variables, event, operationName);
      expect(got).toBe(expected);
      expect(got).toContain('"data":{"runEvents":');
    }
  });

  it('leaseChanged: the same result as graphql-js', async () => {
    const { got, expected } = await both(
      'subscription { leaseChanged(unitId: "unit-7") { id unitId owner token acquiredAt expiresAt version __typename } }',
      {},
      lease,
    );
    expect(got).toBe(expected);
    expect(JSON.parse(got).data.leaseChanged.token).toBe(12);
  });

  it('a field error comes out as graphql-js reports it (message, path, locations), and null where it was', async () => {
    // A date DateTime cannot serialize: the field fails, and its non-null parent with it.
    const broken = { ...events[0], createdAt: new Date(Number.NaN) };
    const { got, expected } = await both('subscription { runEvents(runId: "r1") { seq createdAt } }', {}, broken);
    expect(JSON.parse(got)).toEqual(JSON.parse(expected));
    expect(JSON.parse(got).errors?.[0]?.path).toEqual(['runEvents', 'createdAt']);
  });

  it('a missing non-null field nulls its parent as graphql-js does', async () => {
    const noType = { ...events[0], type: undefined } as unknown as DeliveredEvent;
    const { got, expected } = await both('subscription { runEvents(runId: "r1") { seq type } }', {}, noType);
    expect(JSON.parse(got)).toEqual(JSON.parse(expected));
    expect(JSON.parse(got).data).toBeNull();
  });
});

const argsFor = (query: string, variables: Record<string, unknown> = {}, operationName?: string) => ({
  schema,
  document: parse(query),
  contextValue: {},
  variableValues: { id: 'r1', ...variables },
  operationName,
});

describe('plain execution (events resolved by a plan, not graphql-js)', () => {
  it.each(eventSelections)('runEvents %s: planned, and each result is the one graphql-js makes', async (query, variables) => {
    const operationName = query.includes('subscription Named') ? 'Other' : undefined;
    const args = argsFor(query, variables, operationName);
    const plan = planResults(args);
    expect(plan).toBeDefined();
    for (const event of events) {
      const planned = plan?.(event);
      expect(planned).toBeDefined();
      expect(JSON.stringify(planned)).toBe(JSON.stringify(await execute({ ...args, rootValue: event })));
    }
  });

  it('runOutput chunks are planned alike', async () => {
    const args = argsFor('subscription { runOutput(runId: "r1", stream: "main") { runId stream offset text final durable __typename } }');
    const chunk = { runId: 'r1', stream: 'main', offset: 12, text: 'héllo \u2028 </script>', final: false };
    const planned = planResults(args)?.(chunk);
    expect(planned).toBeDefined();
    expect(JSON.stringify(planned)).toBe(JSON.stringify(await execute({ ...args, rootValue: chunk })));
  });

  it.each([
    ['a date DateTime cannot serialize', { ...events[0], createdAt: new Date(Number.NaN) }],
    ['a missing non-null field', { ...events[0], type: undefined }],
    ['a seq beyond Int', { ...events[0], seq: 2 ** 40 }],
    ['a method where a value is read', { ...events[0], type: () => 'step' }],
    ['a list that is not an array', { ...events[0], missingBefore: new Set([{ from: 1, to: 2 }]) }],
    ['a null in a list of non-null', { ...events[0], missingBefore: [null] }],
  ])("%s: the plan gives up, and the shared result is graphql-js's", async (_, event) => {
    const query = 'subscription { runEvents(runId: "r1") { seq type createdAt missingBefore { from to } } }';
    const args = argsFor(query);
    expect(planResults(args)?.(event)).toBeUndefined();
    const shared = await sharedExecution(args, { plain: true })(event);
    expect(JSON.stringify(shared)).toBe(JSON.stringify(await execute({ ...args, rootValue: event })));
  });

  it('leaseChanged and leasesChanged are planned alike', async () => {
    for (const query of [
      'subscription { leaseChanged(unitId: "unit-7") { id unitId owner token acquiredAt expiresAt version __typename } }',
      'subscription { leasesChanged { ... on Lease { id u: unitId } token } }',
    ]) {
      const args = argsFor(query);
      const planned = planResults(args)?.(lease);
      expect(planned).toBeDefined();
      expect(JSON.stringify(planned)).toBe(JSON.stringify(await execute({ ...args, rootValue: lease })));
    }
  });

  it('selections of resolvers that read more than their parent are not planned', () => {
    expect(planResults(argsFor('subscription { runChanged(runId: "r1") { id status } }'))).toBeUndefined();
    expect(planResults(argsFor('subscription { runsChanged { id } }'))).toBeUndefined();
    // Variables that do not coerce: graphql-js says so, at every event.
    expect(planResults(argsFor('subscription($n: Int) { runEvents(runId: "r1", afterSeq: $n) { seq } }', { n: 'x' }))).toBeUndefined();
  });
});
