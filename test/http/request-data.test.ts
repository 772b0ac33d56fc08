/**
 * No string a client sends becomes code, and an operation answers the same however often it
 * has run: literals, aliases, names and payloads that meant something to a code generator
 * (graphql-jit's marker strings, `__proto__`, quotes, template strings) are data, the twelfth
 * answer equals the first, and both equal graphql-js's own `execute`.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
const runId = 'literal-run';
const dir = mkdtempSync(join(tmpdir(), 'runplane-injection-'));
const marker = join(dir, 'ran');
/** Set on globalThis by any injected code that runs (the server shares this process). */
const flag = '__runplaneInjected';
const g = globalThis as Record<string, unknown>;

// The markers graphql-jit 0.8.9 rewrote in the code it generated (its `new Date(...)`, NaN, Infinity).
const DATE = '__MAGIC_DATE__33a9e76d_02e0_4128_8e92_3530ad3da74d';
const NAN = '__MAGIC_NAN__57f286b9_4c20_487f_b409_79804ddcb4f8';
const INF = '__MAGIC_PLUS_INFINITY__bb201c39_3333_4695_b4ad_7f1722e7aa7a';
const code = `0),globalThis.${flag}=1,process.getBuiltinModule(\`fs\`).writeFileSync(\`${marker}\`,\`x\`),(0`;

beforeAll(async () => {
  api = await startTestServer();
  await api.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 10 }) { __typename } }`);
  await api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "step", payload: { a: 1 } }) { __typename } }`);
});

afterAll(() => {
  delete g[flag];
});

/** The answers of one operation sent `times` times. */
async function repeated(query: string, variables: Record<string, unknown> = {}, times = 12) {
  const answers = [];
  for (let i = 0; i < times; i++) answers.push(await api.gql(query, variables));
  return answers;
}

const hostile: [string, string, Record<string, unknown>?][] = [
  ['a date marker in an id literal', `query { run(id: "${DATE}${code}") { id } }`],
  ['a date marker in a types list', `query { run(id: "${runId}") { events(types: ["${DATE}${code}"]) { edges { node { seq } } } } }`],
  [
    'a date marker inside a payload literal',
    `mutation { appendEvent(input: { runId: "${runId}", type: "step", payload: { at: "${DATE}${code}" }, seq: 1 }) { __typename ... on SequenceConflict { lastSeq } } }`,
  ],
  ['NaN and Infinity markers as ids', `query { a: run(id: "${NAN}") { id } b: run(id: "${INF}") { id } }`],
  ['__proto__ as an alias', 'query { viewer { __proto__: tenant constructor: canWrite } }'],
  ['__proto__ as an alias of a list', `query { run(id: "${runId}") { __proto__: events { edges { node { seq } } } } }`],
  [
    '__proto__ inside a payload literal',
    `mutation { appendEvent(input: { runId: "${runId}", type: "step", payload: { a: 1, __proto__: { polluted: true } } }) { __typename } }`,
  ],
  [
    '__proto__ inside a payload variable',
    'mutation($p: JSON) { appendEvent(input: { runId: "literal-run", type: "step", payload: $p }) { __typename } }',
    { p: JSON.parse('{"a":1,"__proto__":{"polluted":true}}') },
  ],
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a hostile literal on purpose
  ['quotes and template strings in literals', 'query { run(id: "a\\"); globalThis.__runplaneInjected = 1; (\\"`${1}`") { id } }'],
  ['a backslash and a line separator in a literal', 'query { run(id: "x\\\\\\u2028\\u2029y") { id } }'],
  ['a default value with a marker', `query($id: ID! = "${DATE}${code}") { run(id: $id) { id } }`],
  ['a variable holding a marker', 'query($id: ID!) { run(id: $id) { id } }', { id: `${DATE}${code}` }],
  ['an operation name that is code', 'query a__proto__constructor { viewer { tenant } }'],
  [
    'fragments spread under hostile aliases',
    `query { toString: run(id: "${runId}") { ...F } } fragment F on Run { valueOf: id hasOwnProperty: status }`,
  ],
];

describe('request data is never code', () => {
  test.each(hostile)('%s: nothing runs, and every answer equals the first', async (_, query, variables) => {
    const answers = await repeated(query, variables);
    expect(g[flag]).toBeUndefined();
    expect(existsSync(marker)).toBe(false);
    for (const answer of answers) expect(answer).toStrictEqual(answers[0]);
    expect(answers[0]?.data ?? answers[0]?.errors).toBeTruthy();
  });

  test('a date marker is an invalid id, refused by name, not a date or a crash', async () => {
    const [answer] = await repeated(`query { run(id: "${DATE}${code}") { id } }`, {}, 1);
    expect(answer?.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(answer?.errors?.[0]?.message).toMatch(/id/);
  });

  test('__proto__ in a payload literal is refused every time, as graphql-js refuses it, and nothing is stored', async () => {
    const answers = await repeated(
      `mutation { appendEvent(input: { runId: "${runId}", type: "proto", payload: { a: 1, __proto__: { polluted: true } } }) { __typename } }`,
    );
    for (const answer of answers) expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const { data } = await api.gql(
      `query { run(id: "${runId}", consistent: true) { events(types: ["proto"]) { edges { node { seq } } } } }`,
    );
    expect(data.run.events.edges).toEqual([]);
  });

  test('__proto__ as an alias answers under that name, every time', async () => {
    const answers = await repeated('query { viewer { __proto__: tenant } }');
    for (const answer of answers)
      expect(JSON.parse(JSON.stringify(answer))).toEqual(JSON.parse('{"data":{"viewer":{"__proto__":"default"}}}'));
  });

  test('marker strings in a payload are stored and read back as the strings they are', async () => {
    const payload = { date: `${DATE}1`, nan: NAN, inf: INF };
    const appended = await api.gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { ... on Event { seq } } }', {
      input: { runId, type: 'markers', payload },
    });
    const seq = appended.data.appendEvent.seq;
    const answers = await repeated(
      `query { run(id: "${runId}", consistent: true) { events(types: ["markers"]) { edges { node { seq payload } } } } }`,
    );
    for (const answer of answers) expect(answer.data.run.events.edges).toEqual([{ node: { seq, payload } }]);
  });

  test('payload keys that are code in a generated parser are stored as keys, and nothing runs', async () => {
    const payload = { [`"]; globalThis.${flag} = 1; //`]: 1, '`${globalThis.x = 1}`': 2, "'); process.exit(1); ('": { constructor: 3 } };
    for (let i = 0; i < 12; i++) {
      const answer = await api.gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
        input: { runId, type: 'keys', payload },
      });
      expect(answer.data.appendEvent.__typename).toBe('Event');
    }
    expect(g[flag]).toBeUndefined();
    const { data } = await api.gql(
      `query { run(id: "${runId}", consistent: true) { events(types: ["keys"]) { edges { node { payload } } } } }`,
    );
    expect(data.run.events.edges).toHaveLength(12);
    for (const edge of data.run.events.edges) expect(edge.node.payload).toEqual(payload);
  });
});
