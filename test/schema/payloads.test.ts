/**
 * Any JSON value is a payload, stored and read back as it was sent, or refused naming it:
 * keys JavaScript treats specially included, alone and inside concurrent (group-committed) batches.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';

const APPEND = `mutation($input: AppendEventInput!) {
  appendEvent(input: $input) { __typename ... on Event { seq payload } }
}`;
const EVENTS = `query($id: ID!) { run(id: $id, consistent: true) { events(first: 100) { edges { node { seq payload } } } } }`;

/** Keys that mean something to JavaScript objects, and values that fool a marshaller that trusts `constructor`. */
const TRICKY: unknown[] = [
  { constructor: 1 },
  { constructor: 'x' },
  { constructor: { name: 'Set' } },
  { constructor: { name: 'Number' } },
  { constructor: { name: 'Uint8Array' } },
  { prototype: { constructor: null } },
  { toString: 'not a function' },
  { valueOf: 1, hasOwnProperty: true, isPrototypeOf: [] },
  [{ constructor: { name: 'Map' } }, { nested: { constructor: ['a'] } }],
  { '': 'empty key', ' ': 'space' },
  // A value with `then` looks like a promise to the executors (parsed: no thenable in this file's own code).
  JSON.parse('{ "if": "tests fail", "then": "fix them" }'),
  JSON.parse('{ "then": { "then": 1 }, "catch": 2 }'),
];

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

async function storedPayloads(runId: string) {
  const read = await api.gql(EVENTS, { id: runId });
  return (read.data.run.events.edges as { node: { seq: number; payload: unknown } }[]).map((e) => e.node.payload);
}

describe('tricky keys', () => {
  test('are stored and read back faithfully, from variables, from a subscription and from an idempotent retry', async () => {
    const runId = await newRun(api);
    const ws = wsClient(api.url);
    const sub = subscribeWs<{ seq: number; payload: unknown }>(
      ws,
      'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq payload } }',
      { runId },
      'runEvents',
    );
    for (const [i, payload] of TRICKY.entries()) {
      const first = await api.gql(APPEND, { input: { runId, type: 'tricky', payload, idempotencyKey: `${runId}-${i}` } });
      expect(first.data?.appendEvent, JSON.stringify(first)).toEqual({ __typename: 'Event', seq: i + 1, payload });
      const again = await api.gql(APPEND, { input: { runId, type: 'tricky', payload, idempotencyKey: `${runId}-${i}` } });
      expect(again.data?.appendEvent).toEqual(first.data.appendEvent);
    }
    expect(await storedPayloads(runId)).toEqual(TRICKY);
    expect((await sub.until(TRICKY.length)).map((e) => e.payload)).toEqual(TRICKY);
    sub.stop();
    await ws.dispose();
  });

  test('written as GraphQL literals, they are stored as written', async () => {
    const runId = await newRun(api);
    const written = await api.gql(
      `mutation { appendEvent(input: { runId: "${runId}", type: "t", payload: { constructor: { name: "Set" }, toString: [1, 2] } }) { __typename } }`,
    );
    expect(written.data?.appendEvent.__typename, JSON.stringify(written)).toBe('Event');
    expect(await storedPayloads(runId)).toEqual([{ constructor: { name: 'Set' }, toString: [1, 2] }]);
  });

  test('a variable inside a literal is refused saying to pass the whole value as one, given or not, and nothing is written', async () => {
    const runId = await newRun(api);
    const literal = `mutation($x: JSON) { appendEvent(input: { runId: "${runId}", type: "t", payload: { a: $x, b: [$x, $x] } }) { __typename } }`;
    for (const variables of [{ x: [1, 2, 3] }, {}]) {
      const refused = await api.gql(literal, variables);
      expect(refused.errors?.[0]?.message).toMatch(
        /variable \(\$x\) inside a JSON literal is not taken: pass the whole value as one variable/,
      );
    }
    expect(await storedPayloads(runId)).toEqual([]);
  });

  test('__proto__ is refused naming the field and the rule, and nothing is written', async () => {
    const runId = await newRun(api);
    const body = `{"query":${JSON.stringify(APPEND)},"variables":{"input":{"runId":"${runId}","type":"t","payload":{"a":[{"__proto__":{"polluted":true}}]}}}}`;
    const response = await fetch(api.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const refused = (await response.json()) as { errors?: { message: string; extensions?: { code?: string } }[] };
    expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(refused.errors?.[0]?.message).toMatch(/input\.payload: must not use the object key __proto__/);
    expect(await storedPayloads(runId)).toEqual([]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('values JSON cannot hold', () => {
  test.each([
    ['a bare word', '{ x: NaN }', /NaN is not a JSON value/],
    ['Infinity', '{ x: Infinity }', /Infinity is not a JSON value/],
    ['a number too large for a double', '{ x: 1e400 }', /numbers DynamoDB can store/],
    ['a variable not given', '{ x: $missing }', /\$missing/],
  ])('%s is refused, not stored as nothing', async (_, literal, message) => {
    const runId = await newRun(api);
    const response = await api.gql(
      `mutation${literal.includes('$missing') ? '($missing: Int)' : ''} { appendEvent(input: { runId: "${runId}", type: "t", payload: ${literal} }) { __typename } }`,
    );
    expect(response.errors?.[0]?.message, JSON.stringify(response)).toMatch(message);
    expect(response.data?.appendEvent ?? null).toBeNull();
    expect(await storedPayloads(runId)).toEqual([]);
  });
});

describe('in a concurrent batch', () => {
  test('appends at once, one with each tricky key and one refused: every good one is written once, the bad one alone fails', async () => {
    const runId = await newRun(api);
    const count = 3 * TRICKY.length + 3;
    const payloads: unknown[] = Array.from({ length: count }, (_, i) => ({ i }));
    TRICKY.forEach((tricky, i) => {
      payloads[3 * i + 1] = { i: 3 * i + 1, tricky };
    });
    const bad = count - 1;
    const sends = payloads.map((payload, i) => {
      const body =
        i === bad
          ? `{"query":${JSON.stringify(APPEND)},"variables":{"input":{"runId":"${runId}","type":"t","payload":{"i":${i},"__proto__":1}}}}`
          : JSON.stringify({ query: APPEND, variables: { input: { runId, type: 't', payload } } });
      return fetch(api.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.json());
    });
    const results = (await Promise.all(sends)) as { data?: { appendEvent: { __typename: string; seq: number } }; errors?: unknown[] }[];
    const written = results.filter((r) => r.data?.appendEvent?.__typename === 'Event');
    expect(written, JSON.stringify(results.filter((r) => r.errors))).toHaveLength(count - 1);
    expect(results[bad]?.errors).toHaveLength(1);
    const stored = (await storedPayloads(runId)) as { i: number }[];
    expect(stored.map((p) => p.i).sort((a, b) => a - b)).toEqual(payloads.slice(0, bad).map((_, i) => i));
    for (const payload of stored) expect(payload).toEqual(payloads[payload.i]);
  });
});
