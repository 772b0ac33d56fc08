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
const deepJson = fc.integer({ min: 20, max: 400 }).map((depth) => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`));
const payload = fc.oneof(fc.jsonValue({ maxDepth: 4 }), deepJson, fc.constant({ big: 'x'.repeat(70_000) }), anyValue);
const status = fc.oneof(fc.constantFrom('RUNNING', 'COMPLETED', 'CANCELLED', 'WAITING_FOR_TOOL'), hostileString);

/** Per mutation: a valid input, and what each field may be instead. */
const mutations: Record<string, { valid: Record<string, unknown>; hostile: Record<string, fc.Arbitrary<unknown>> }> = {
  createRun: {
    valid: { task: 't', budgetCap: 5 },
    hostile: { id: hostileString, task: hostileString, budgetCap: hostileNumber, idempotencyKey: hostileString },
  },
  appendEvent: {
    valid: { runId: RUN, type: 'tool.called' },
    hostile: { runId: hostileString, type: hostileString, payload, seq: hostileNumber, cost: hostileNumber, idempotencyKey: hostileString },
  },
  transitionRun: {
    valid: { runId: RUN, from: 'WAITING_FOR_TOOL', to: 'RUNNING' },
    hostile: { runId: hostileString, from: status, to: status, expectedVersion: hostileNumber, idempotencyKey: hostileString },
  },
  chargeBudget: {
    valid: { runId: RUN, amount: 1 },
    hostile: { runId: hostileString, amount: hostileNumber, idempotencyKey: hostileString },
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
  const { Items = [] } = await api.server.clients.doc.send(new ScanCommand({ TableName: api.table, ConsistentRead: true }));
  return Items.map((item) => JSON.stringify(item)).sort();
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
