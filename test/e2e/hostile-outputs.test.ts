/**
 * Issue 49, finding 1, scaled to CI: a write key gives a run as many one-character output
 * streams as it can; a READ key of the same tenant then asks for them over and over, aliased,
 * from several clients at once, and subscribes to the run with the same selection while it
 * changes. A run has at most RUNPLANE_MAX_OUTPUT_STREAMS streams; no request (no event of a
 * subscription) makes more than RUNPLANE_MAX_REQUEST_READS table reads, counted by the engine
 * itself; another tenant is served meanwhile about as fast as alone; the server's memory stays
 * bounded.
 */
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { onlyEmbedded } from '../support/engine.ts';
import { type HostileServer, outcomeOf, p99, peakWhile, startHostileServer, timed, timedWhile } from '../support/hostile.ts';
import { waitFor } from '../support/wait.ts';

const WRITER = 'outputs-writer-key-0123456789';
const READER = 'outputs-reader-key-0123456789';
const OTHER = 'outputs-other-key-0123456789';
/** The defaults, as the server runs with them. */
const MAX_OUTPUT_STREAMS = 64;
const MAX_REQUEST_READS = 1000;
/** Streams the writer tries to give the run (the finding: 3,000). */
const STREAMS_TRIED = 300;
/** Further runs of the tenant, each with as many streams as a run may have: what `runs { outputs }` multiplies. */
const FULL_RUNS = 3;
const ALIASES = 15;
const CLIENTS = 4;
const REQUESTS_PER_CLIENT = 3;
/** The server's heap is capped: unbounded, the reads' results and promises would pass it. */
const HEAP_CAP_MB = 256;
/** Its resident set may grow by at most this over the attack (the capped heap and what the runtime keeps beside it). */
const MAX_RSS_GROWTH = 128 * 1024 * 1024;
/** Reads besides the attack's: the other tenant's listings and the stall watcher's rounds. */
const READS_BESIDE = 400;

const APPEND = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) { __typename ... on OutputChunk { offset } ... on Error { message } }
}`;
const aliased = (selection: string, count = ALIASES, prefix = 'a') =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}: ${selection}`).join('\n');
const RUN_OUTPUTS = `query($id: ID!) { ${aliased('run(id: $id) { outputs { length } }')} }`;
const LISTED_OUTPUTS = '{ runs(first: 500) { edges { node { outputs { length } } } } }';
const LISTED_OUTPUTS_ALIASED = `{ ${aliased('runs(first: 500) { edges { node { outputs { length } } } }')} }`;
/** What a client sends, in order (each client the same). */
const ATTACK = [RUN_OUTPUTS, LISTED_OUTPUTS, LISTED_OUTPUTS_ALIASED].slice(0, REQUESTS_PER_CLIENT);

let server: HostileServer;
const run = 'many-streams';

const gql = (query: string, variables: Record<string, unknown> = {}, key = WRITER) => server.gql(query, variables, key);
const otherTenantsRuns = () => gql('{ runs(first: 10) { edges { node { id status } } } }', {}, OTHER);

async function createRun(id: string, key = WRITER) {
  const created = await gql(
    'mutation($id: ID!) { createRun(input: { id: $id, task: "t", budgetCap: 1000000 }) { __typename } }',
    { id },
    key,
  );
  expect(created.data?.createRun?.__typename, JSON.stringify(created)).toBe('Run');
}

/** Appends one character to a new stream of `runId`: the response. */
const newStream = (runId: string, stream: string) =>
  gql(APPEND, { input: { runId, stream, offset: 0, text: 'x', final: false, durable: true } });

describe.skipIf(onlyEmbedded)('a run made to hold many output streams, read through a READ key', () => {
  beforeAll(async () => {
    server = await startHostileServer({
      heapMb: HEAP_CAP_MB,
      env: {
        RUNPLANE_API_KEYS: `${WRITER}=acme:write:writer,${READER}=acme:read,${OTHER}=globex`,
        RUNPLANE_OUTPUT_FLUSH_MS: '20',
        RUNPLANE_SUBSCRIBE_RATE: '1000',
      },
    });
    await createRun(run);
    for (let i = 0; i < 5; i++) await createRun(`other-${i}`, OTHER);
    for (let r = 0; r < FULL_RUNS; r++) {
      await createRun(`full-${r}`);
      for (let from = 0; from < MAX_OUTPUT_STREAMS; from += 16)
        await Promise.all(Array.from({ length: 16 }, (_, i) => newStream(`full-${r}`, `s${from + i}`)));
    }
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  });

  test(`streams past RUNPLANE_MAX_OUTPUT_STREAMS (${MAX_OUTPUT_STREAMS}) are refused with LIMIT_EXCEEDED naming it, ${STREAMS_TRIED} tried 10 at a time`, async () => {
    const answers: Awaited<ReturnType<typeof newStream>>[] = [];
    for (let from = 0; from < STREAMS_TRIED; from += 10)
      answers.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => newStream(run, `s${from + i}`)))));
    const accepted = answers.filter((a) => a.data?.appendOutput?.__typename === 'OutputChunk');
    const refused = answers.filter((a) => a.errors?.[0]?.extensions?.code === 'LIMIT_EXCEEDED');
    expect(accepted.length).toBe(MAX_OUTPUT_STREAMS);
    expect(refused.length).toBe(STREAMS_TRIED - MAX_OUTPUT_STREAMS);
    expect(refused[0]?.errors?.[0]?.message).toContain('RUNPLANE_MAX_OUTPUT_STREAMS');
    expect(refused[0]?.errors?.[0]?.extensions?.variable).toBe('RUNPLANE_MAX_OUTPUT_STREAMS');
    // What the run holds, read back: the streams accepted, no more.
    const read = await gql('query($id: ID!) { run(id: $id, consistent: true) { outputs { stream } } }', { id: run }, READER);
    expect(read.data?.run?.outputs).toHaveLength(MAX_OUTPUT_STREAMS);
  }, 120_000);

  test(`${CLIENTS} READ clients, ${REQUESTS_PER_CLIENT} requests each of ${ALIASES} aliased outputs: each answered or refused within RUNPLANE_MAX_REQUEST_READS; the other tenant served; memory bounded`, async () => {
    const baseline = await timed(otherTenantsRuns, 20);
    const rssBefore = await server.rss();
    const readsBefore = await server.reads();
    const outcomes: string[] = [];
    const attack = Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (const query of ATTACK) {
          const answer = await gql(query, { id: run }, READER).catch((err: Error) => err);
          outcomes.push(answer instanceof Error ? `failed: ${answer.message}` : outcomeOf(answer));
        }
      }),
    );
    const [during, peakRss] = await Promise.all([timedWhile(otherTenantsRuns, attack), peakWhile(() => server.rss(), attack), attack]);
    const reads = (await server.reads()) - readsBefore;
    const executed = outcomes.filter((o) => o !== 'COST_LIMIT').length;
    const report = {
      outcomes,
      reads,
      executed,
      otherTenant: { baselineP99: p99(baseline), duringP99: p99(during), n: during.length },
      rssGrowthMb: (peakRss - rssBefore) / 2 ** 20,
    };
    console.log('hostile outputs:', JSON.stringify(report));
    expect(server.alive(), server.main.output().slice(-2000)).toBe(true);
    // Answered whole, refused up front by cost, or refused at the read past the budget: nothing else.
    for (const outcome of outcomes) expect(['answered', 'COST_LIMIT', 'LIMIT_EXCEEDED']).toContain(outcome);
    expect(reads, JSON.stringify(report)).toBeLessThanOrEqual(executed * MAX_REQUEST_READS + READS_BESIDE);
    expect(p99(during), JSON.stringify(report)).toBeLessThan(Math.max(500, 5 * p99(baseline)));
    expect(peakRss - rssBefore, JSON.stringify(report)).toBeLessThan(MAX_RSS_GROWTH);
  }, 240_000);

  test(`runChanged { outputs } subscriptions, one per client with ${ALIASES} aliases, while the run changes: each event within the budget`, async () => {
    const CHANGES = 3;
    const readsBefore = await server.reads();
    const sockets = Array.from({ length: CLIENTS }, () =>
      createClient({
        url: server.url.replace(/^http/, 'ws'),
        webSocketImpl: WebSocket,
        connectionParams: { authorization: `Bearer ${READER}` },
        retryAttempts: 0,
      }),
    );
    // Each its own document (alias names of its own), so that no two share an execution.
    const results = sockets.map((client, c) => {
      const seen = { results: 0, versions: [] as number[], codes: new Set<string>(), ended: undefined as unknown };
      const query = `subscription($id: ID!) { runChanged(runId: $id) { budget { version } ${aliased('outputs { length }', ALIASES, `c${c}a`)} } }`;
      client.subscribe<{ runChanged: { budget?: { version: number } } }>(
        { query, variables: { id: run } },
        {
          next: (result) => {
            seen.results++;
            const version = result.data?.runChanged?.budget?.version;
            if (version !== undefined) seen.versions.push(version);
            for (const error of result.errors ?? []) seen.codes.add(String(error.extensions?.code));
          },
          error: (err) => {
            seen.ended = err;
          },
          complete: () => undefined,
        },
      );
      return seen;
    });
    /** Throws once the table reads are more than the results so far may make. */
    const tooMany = async () => {
      const executions = results.reduce((n, r) => n + r.results, 0);
      const reads = (await server.reads()) - readsBefore;
      // An execution may be under way for each subscriber besides those delivered.
      const bound = (executions + CLIENTS) * MAX_REQUEST_READS + READS_BESIDE;
      if (reads > bound) throw new Error(`${reads} table reads for ${executions} subscription results: over ${bound}`);
    };
    try {
      await waitFor(
        async () => {
          await tooMany();
          return results.every((r) => r.results >= 1 || r.ended !== undefined);
        },
        { timeoutMs: 60_000, intervalMs: 100, what: 'every subscription to get the run as it is' },
      );
      const charged = await gql(
        'mutation($id: ID!) { appendEvent(input: { runId: $id, type: "spend", cost: 1 }) { __typename } }',
        { id: run },
        WRITER,
      );
      expect(charged.data?.appendEvent?.__typename).toBe('Event');
      for (let i = 1; i < CHANGES; i++)
        await gql('mutation($id: ID!) { appendEvent(input: { runId: $id, type: "spend", cost: 1 }) { __typename } }', { id: run }, WRITER);
      const last = (await gql('query($id: ID!) { run(id: $id, consistent: true) { budget { version } } }', { id: run }, READER)).data?.run
        ?.budget?.version as number;
      await waitFor(
        async () => {
          await tooMany();
          return results.every((r) => r.versions.includes(last) || r.codes.size > 0 || r.ended !== undefined);
        },
        { timeoutMs: 60_000, intervalMs: 100, what: `every subscription to see budget version ${last}` },
      );
      console.log('hostile outputs, subscriptions:', JSON.stringify(results.map((r) => ({ ...r, codes: [...r.codes] }))));
      for (const r of results) {
        expect(r.ended).toBeUndefined();
        // Answered, or refused at the read past the budget (one execution's refusal, not the subscription's end).
        for (const code of r.codes) expect(code).toBe('LIMIT_EXCEEDED');
      }
      await tooMany();
      expect(server.alive(), server.main.output().slice(-2000)).toBe(true);
    } finally {
      await Promise.all(sockets.map((s) => s.dispose()));
    }
  }, 180_000);
});
