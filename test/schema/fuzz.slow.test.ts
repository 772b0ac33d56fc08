/**
 * Generated hostile input against every mutation: no response is a 5xx, every refusal names
 * its problem, and a refused request leaves the table exactly as it was.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
const RUN = 'fuzz-run';
const UNIT = 'fuzz-unit';

beforeAll(async () => {
  api = await startTestServer();
  await api.gql(`mutation { createRun(input: { id: "${RUN}", task: "fuzzed", budgetCap: 100 }) { __typename } }`);
  await api.gql(`mutation { acquireLease(input: { unitId: "${UNIT}", owner: "w", ttlSeconds: 600 }) { __typename } }`);
  // Held by w: another holder's claim is refused (RunHeld), and writes nothing.
  await api.gql(`mutation { claimRun(input: { runId: "${RUN}", holder: "w", ttlSeconds: 600 }) { __typename } }`);
});

const nasty = fc.constantFrom(
  '',
  ' ',
  '#',
  'a#b',
  `${RUN}#meta`,
  'default#run#x',
  '\u0000',
  'line\nbreak',
  '\u202eevil',
  '\ud800',
  '../../etc/passwd',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a log4shell-style string, on purpose
  '${jndi:ldap://x}',
  "'; DROP TABLE runs; --",
  'x'.repeat(129),
  'x'.repeat(70_000),
  '-leading',
);
const hostileString = fc.oneof(nasty, fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 50 }));
const hostileNumber = fc.oneof(
  fc.constantFrom(-1, 0, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1.5, -0.0001, Number.MAX_VALUE),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const anyValue = fc.oneof(
  hostileString,
  hostileNumber,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.object({ maxDepth: 2 }),
);
/** Keys that mean something to JavaScript objects: chosen on purpose, not left to chance. */
const TRICKY_KEYS = ['constructor', '__proto__', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', '__defineGetter__'];
const trickyKey = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...TRICKY_KEYS) }, fc.string({ maxLength: 10 }));
/** JSON values whose objects use those keys, at any depth (fast-check keeps `__proto__` as a real key). */
const trickyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.jsonValue({ maxDepth: 1 }),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(trickyKey, tie('value'), { maxKeys: 4 }),
    fc.record({
      constructor: fc.oneof(fc.record({ name: fc.constantFrom('Set', 'Map', 'Number', 'String', 'Uint8Array') }), tie('value')),
    }),
  ),
})).value;
const deepJson = fc.integer({ min: 20, max: 400 }).map((depth) => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`));
const payload = fc.oneof(fc.jsonValue({ maxDepth: 4 }), trickyJson, deepJson, fc.constant({ big: 'x'.repeat(70_000) }), anyValue);
const status = fc.oneof(fc.constantFrom('RUNNING', 'COMPLETED', 'CANCELLED', 'WAITING_FOR_TOOL'), hostileString);

/** Per mutation: a valid input, and what each field may be instead. */
const mutations: Record<string, { valid: Record<string, unknown>; hostile: Record<string, fc.Arbitrary<unknown>> }> = {
  createRun: {
    valid: { task: 't', budgetCap: 5 },
    hostile: { id: hostileString, task: hostileString, budgetCap: hostileNumber, idempotencyKey: hostileString },
  },
  appendEvent: {
    valid: { runId: RUN, type: 'tool.called' },
    hostile: {
      runId: hostileString,
      type: hostileString,
      payload,
      seq: hostileNumber,
      cost: hostileNumber,
      fencingToken: hostileNumber,
      idempotencyKey: hostileString,
    },
  },
  transitionRun: {
    valid: { runId: RUN, from: 'WAITING_FOR_TOOL', to: 'RUNNING' },
    hostile: {
      runId: hostileString,
      from: status,
      to: status,
      expectedVersion: hostileNumber,
      fencingToken: hostileNumber,
      idempotencyKey: hostileString,
    },
  },
  chargeBudget: {
    valid: { runId: RUN, amount: 1 },
    hostile: { runId: hostileString, amount: hostileNumber, fencingToken: hostileNumber, idempotencyKey: hostileString },
  },
  claimRun: {
    valid: { runId: RUN, holder: 'other', ttlSeconds: 30 },
    hostile: { runId: hostileString, holder: hostileString, ttlSeconds: hostileNumber, idempotencyKey: hostileString },
  },
  renewRunClaim: {
    valid: { runId: RUN, holder: 'w', token: 1, ttlSeconds: 30 },
    hostile: { runId: hostileString, holder: hostileString, token: hostileNumber, ttlSeconds: hostileNumber },
  },
  releaseRunClaim: {
    valid: { runId: RUN, holder: 'x', token: 1 },
    hostile: { runId: hostileString, holder: hostileString, token: hostileNumber },
  },
  cancelRun: {
    valid: { runId: 'fuzz-no-such-run', reason: 'r' },
    hostile: { runId: hostileString, reason: hostileString, idempotencyKey: hostileString },
  },
  acquireLease: {
    valid: { unitId: UNIT, owner: 'other', ttlSeconds: 30 },
    hostile: { unitId: hostileString, owner: hostileString, ttlSeconds: hostileNumber, idempotencyKey: hostileString },
  },
  renewLease: {
    valid: { unitId: UNIT, owner: 'w', token: 1, ttlSeconds: 30 },
    hostile: {
      unitId: hostileString,
      owner: hostileString,
      token: hostileNumber,
      ttlSeconds: hostileNumber,
      idempotencyKey: hostileString,
    },
  },
  releaseLease: {
    valid: { unitId: UNIT, owner: 'x', token: 1 },
    hostile: { unitId: hostileString, owner: hostileString, token: hostileNumber, idempotencyKey: hostileString },
  },
};

/** One field hostile (or of the wrong type) and the rest valid, so each field's own check is reached; or every field hostile. */
function inputs({ valid, hostile }: (typeof mutations)[string]) {
  const fields = Object.keys(hostile);
  const oneBad = fc
    .constantFrom(...fields)
    .chain((name) => fc.oneof(hostile[name] as fc.Arbitrary<unknown>, anyValue).map((value) => ({ ...valid, [name]: value })));
  const allBad = fc.record(
    Object.fromEntries(fields.map((name) => [name, fc.oneof(hostile[name] as fc.Arbitrary<unknown>, fc.constant(valid[name]))])),
  );
  return fc.oneof({ weight: 3, arbitrary: oneBad }, allBad);
}

const inputType = (mutation: string) => `${mutation[0]?.toUpperCase()}${mutation.slice(1)}Input`;

async function table() {
  // A terminal transition stamps the run's events with its TTL after answering: let that finish first.
  await api.server.stores.runs.settled();
  const { Items = [] } = await api.server.clients.doc.send(new ScanCommand({ TableName: api.table, ConsistentRead: true }));
  // Runplane's own rows (the stall watcher renewing its lease) change on their own clock, not the requests'.
  return Items.filter((item) => !String(item.pk).startsWith('_sys#'))
    .map((item) => JSON.stringify(item))
    .sort();
}

describe('hostile input against every mutation', () => {
  for (const [mutation, spec] of Object.entries(mutations)) {
    test(mutation, async () => {
      await fc.assert(
        fc.asyncProperty(inputs(spec), async (input) => {
          const before = await table();
          const response = await fetch(api.url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              query: `mutation($input: ${inputType(mutation)}!) { ${mutation}(input: $input) { __typename ... on Error { message } } }`,
              variables: { input },
            }),
          });
          expect(response.status).toBeLessThan(500);
          const body = (await response.json()) as {
            data?: Record<string, { __typename: string; message?: string }>;
            errors?: { message: string }[];
          };
          const result = body.data?.[mutation];
          const refused = !!body.errors?.length || (result !== undefined && 'message' in result);
          for (const error of body.errors ?? []) {
            // A refusal says which input, and what is wrong with it.
            expect(error.message).toMatch(/input|Variable "\$input"|body|JSON|larger than/i);
            expect(error.message).not.toMatch(/Unexpected error/);
          }
          if (result && 'message' in result) expect(result.message?.length).toBeGreaterThan(10);
          if (refused) expect(await table()).toEqual(before);
        }),
        { numRuns: 80 },
      );
    });
  }
});

/** Whether a JSON value has an object with the key `__proto__` (the one key the API refuses, by its documented rule). */
const hasProtoKey = (value: unknown): boolean =>
  value !== null &&
  typeof value === 'object' &&
  ((!Array.isArray(value) && Object.hasOwn(value, '__proto__')) || Object.values(value).some(hasProtoKey));
/** Whether it holds a number DynamoDB cannot store (README: 0, or a magnitude from 1e-130 to below 1e126). */
const hasUnstorable = (value: unknown): boolean =>
  typeof value === 'number'
    ? value !== 0 && !(Math.abs(value) >= 1e-130 && Math.abs(value) < 1e126)
    : value !== null && typeof value === 'object' && Object.values(value).some(hasUnstorable);

describe('hostile payloads in concurrent batches', () => {
  test('every append of a batch is stored exactly as sent or refused alone; none fails for another', async () => {
    let batchNumber = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(trickyJson, { minLength: 2, maxLength: 24 }), async (payloads) => {
        const runId = `fuzz-batch-${++batchNumber}`;
        await api.gql(`mutation { createRun(input: { id: "${runId}", task: "batch", budgetCap: 1 }) { __typename } }`);
        const query = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';
        const answers = await Promise.all(
          payloads.map(async (payload, i) => {
            const response = await fetch(api.url, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ query, variables: { input: { runId, type: 'fuzz', payload: { i, payload } } } }),
            });
            expect(response.status).toBeLessThan(500);
            return (await response.json()) as {
              data?: { appendEvent?: { seq: number } };
              errors?: { message: string; extensions?: { code?: string } }[];
            };
          }),
        );
        const stored = await api.gql(`{ run(id: "${runId}", consistent: true) { events(first: 100) { edges { node { seq payload } } } } }`);
        const events = (stored.data.run.events.edges as { node: { seq: number; payload: { i: number; payload: unknown } } }[]).map(
          (e) => e.node,
        );
        expect(events.map((e) => e.seq)).toEqual(events.map((_, k) => k + 1));
        for (const [i, answer] of answers.entries()) {
          const refused = hasProtoKey(payloads[i]) || hasUnstorable(payloads[i]);
          if (refused) {
            expect(answer.errors?.[0]?.extensions?.code, JSON.stringify(answer)).toBe('BAD_USER_INPUT');
            expect(answer.errors?.[0]?.message).toMatch(/input\.payload: must (not use the object key __proto__|only hold numbers)/);
            expect(events.some((e) => e.payload.i === i)).toBe(false);
          } else {
            expect(answer.data?.appendEvent?.seq, JSON.stringify(answer)).toBeGreaterThan(0);
            expect(events.find((e) => e.seq === answer.data?.appendEvent?.seq)?.payload).toEqual({
              i,
              payload: JSON.parse(JSON.stringify(payloads[i])),
            });
          }
        }
      }),
      { numRuns: 40 },
    );
  });
});
