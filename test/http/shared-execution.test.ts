/**
 * Subscription results are executed once per event for every subscriber asking alike: what a
 * client gets must be what graphql-js makes of the same event, selection for selection, errors
 * included, and the second subscriber gets the very result the first did.
 */
import { execute, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import type { DeliveredEvent, Lease } from '../../src/domain/run.ts';
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

async function both(query: string, variables: Record<string, unknown>, rootValue: unknown, operationName?: string) {
  const args = { schema, document: parse(query), rootValue, contextValue: {}, variableValues: { id: 'r1', ...variables }, operationName };
  const shared = sharedExecution(args);
  const first = await shared(rootValue);
  // Another subscriber asking alike is handed the same result, not a second execution.
  if (typeof rootValue === 'object' && rootValue !== null) expect(await shared(rootValue)).toBe(first);
  return { got: JSON.stringify(first), expected: JSON.stringify(await execute(args)) };
}

describe('shared subscription execution', () => {
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
