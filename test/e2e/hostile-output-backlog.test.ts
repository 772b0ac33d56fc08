/**
 * Issue 49, finding 4, scaled to CI: the output waiting to be stored is shared between tenants.
 * With the engine's partition limits on (a partition takes RUNPLANE_ENGINE_PARTITION_WCU write
 * units a second, as DynamoDB's does), tenant A's many writers of large texts to one run fill
 * what the server holds for A, and are refused (UNAVAILABLE, retryable, naming the tenant's
 * share); tenant B's small appendOutputs meanwhile all succeed, about as fast as alone.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { defaultRetry, delayFor, sleep } from '../../src/client/retry.ts';
import { type GraphQLErrorShape, p99, timed } from '../support/hostile.ts';
import { type MainProcess, startMain } from '../support/main-process.ts';
import { waitFor } from '../support/wait.ts';

const HOG = 'backlog-hog-key-0123456789';
const CALM = 'backlog-calm-key-0123456789';
/** Tenant A's writers, one stream each, and the text each write carries. */
const WRITERS = 48;
const TEXT_BYTES = 512 * 1024;
/** Tenant B's appends while A's backlog is full. */
const CALM_APPENDS = 25;

const APPEND = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) { __typename ... on OutputChunk { offset } ... on Error { message } }
}`;

/** A write unit is 1 KB: tenant A's run partition stores about this many KB a second, far less than its writers send. */
const PARTITION_WCU = 100;

let server: MainProcess;
let url = '';
const alive = () => server.child.exitCode === null && server.child.signalCode === null;

// biome-ignore lint/suspicious/noExplicitAny: tests read deep into responses by path
async function gql(query: string, variables: Record<string, unknown>, key: string): Promise<{ data?: any; errors?: GraphQLErrorShape[] }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: Record<string, unknown>; errors?: GraphQLErrorShape[] };
}

beforeAll(async () => {
  server = startMain({
    RUNPLANE_IN_MEMORY: 'true',
    RUNPLANE_ENGINE_PARTITION_LIMITS: 'true',
    RUNPLANE_ENGINE_PARTITION_WCU: String(PARTITION_WCU),
    RUNPLANE_API_KEYS: `${HOG}=hog,${CALM}=calm`,
    RUNPLANE_GRAPHIQL: 'false',
    RUNPLANE_KEEP_ALIVE_SECONDS: '60',
    RUNPLANE_OUTPUT_FLUSH_MS: '20',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  });
  await waitFor(() => /Runplane is up: (\S+)/.test(server.output()) || !alive(), { timeoutMs: 60_000, what: 'the server' });
  url = /Runplane is up: (\S+)/.exec(server.output())?.[1] ?? '';
  if (!url) throw new Error(`the server did not start:\n${server.output()}`);
  for (const [id, key] of [
    ['hog-run', HOG],
    ['calm-run', CALM],
  ] as const) {
    const created = await gql('mutation($id: ID!) { createRun(input: { id: $id, task: "t", budgetCap: 1 }) { __typename } }', { id }, key);
    expect(created.data?.createRun?.__typename, JSON.stringify(created)).toBe('Run');
  }
}, 120_000);

afterAll(async () => {
  // Not stopped gracefully: that would store A's backlog first, through its throttled partition.
  server?.child.kill('SIGKILL');
  await server?.exited;
});

test(`${WRITERS} writers of ${TEXT_BYTES / 1024} KB texts to one run fill their tenant's share; another tenant's ${CALM_APPENDS} small appends all succeed`, async () => {
  let calmOffset = 0;
  const calmAppend = async () => {
    const text = `line ${calmOffset}\n`;
    const answer = await gql(APPEND, { input: { runId: 'calm-run', stream: 'log', offset: calmOffset, text } }, CALM);
    if (answer.data?.appendOutput?.__typename === 'OutputChunk') calmOffset += text.length;
    return answer;
  };
  const baseline = await timed(calmAppend, 20);

  const text = 'x'.repeat(TEXT_BYTES);
  const refusals: GraphQLErrorShape[] = [];
  const refusedWriters = new Set<number>();
  let stopped = false;
  // Each writer appends on and on, a refused write tried again after runplane/client's back-off
  // (the server asks for it: retryable), so that the hog keeps its backlog full all along.
  const hog = Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      let offset = 0;
      let retries = 0;
      while (!stopped) {
        const answer = await gql(APPEND, { input: { runId: 'hog-run', stream: `s${w}`, offset, text } }, HOG);
        if (answer.data?.appendOutput?.__typename === 'OutputChunk') {
          offset += TEXT_BYTES;
          retries = 0;
        } else {
          refusals.push(...(answer.errors ?? [{ message: JSON.stringify(answer) }]));
          refusedWriters.add(w);
          await sleep(delayFor(defaultRetry, retries++));
        }
      }
    }),
  );
  try {
    // Every writer refused once: what the server holds for the tenant (or in all) is full.
    await waitFor(() => refusedWriters.size === WRITERS, { timeoutMs: 60_000, what: 'every writer of the hog to be refused' });
    const calm: { ms: number; answer: Awaited<ReturnType<typeof calmAppend>> }[] = [];
    for (let i = 0; i < CALM_APPENDS; i++) {
      const started = performance.now();
      const answer = await calmAppend();
      calm.push({ ms: performance.now() - started, answer });
    }
    const during = calm.map((c) => c.ms);
    const report = JSON.stringify({
      baselineP99: p99(baseline),
      p99: p99(during),
      refusals: refusals.length,
      calmRefused: [...new Set(calm.flatMap((c) => c.answer.errors ?? []).map((e) => `${e.extensions?.code}: ${e.message}`))],
      calmAnswered: calm.filter((c) => c.answer.data?.appendOutput?.__typename === 'OutputChunk').length,
    });
    console.log('hostile output backlog:', report);
    expect(alive(), server.output().slice(-1500)).toBe(true);
    expect(JSON.parse(report).calmAnswered, report).toBe(CALM_APPENDS);
    expect(p99(during), report).toBeLessThan(Math.max(500, 5 * p99(baseline)));
    // The hog is told to come back, and why.
    for (const refusal of refusals) expect(refusal.extensions, refusal.message).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(
      refusals.some((r) => /this tenant has more output waiting to be stored than its share/.test(r.message)),
      report,
    ).toBe(true);
  } finally {
    stopped = true;
    await hog;
  }
}, 180_000);
