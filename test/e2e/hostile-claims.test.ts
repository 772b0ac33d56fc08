/**
 * Issue 49, finding 5, scaled to CI: a tenant with hundreds of claimed runs, and a READ key of
 * it listing them all with their claims and budgets, aliased, from several clients at once. The
 * claims and budgets of a page are read together (BatchGetItem, 100 keys a request), so each
 * alias makes a handful of table requests, not one per run; another tenant is served meanwhile
 * about as fast as alone; the server's memory stays bounded.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { onlyEmbedded } from '../support/engine.ts';
import { type HostileServer, outcomeOf, p99, peakWhile, startHostileServer, timed, timedWhile } from '../support/hostile.ts';

const WRITER = 'claims-writer-key-0123456789';
const READER = 'claims-reader-key-0123456789';
const OTHER = 'claims-other-key-0123456789';
/** The tenant's runs, each claimed (the finding: 500 a page, 15 aliases: 7,500 reads a request). */
const RUNS = 500;
const ALIASES = 15;
const CLIENTS = 4;
const REQUESTS_PER_CLIENT = 2;
/**
 * Table requests one alias may make: the listing's (4 index shards, a Query each and at most 4
 * for one) and the claims' and budgets' (2 rows a run, 100 keys a BatchGetItem).
 */
const READS_PER_ALIAS = 4 * 4 + Math.ceil((2 * RUNS) / 100);
/** Reads besides the attack's: the other tenant's listings and the stall watcher's rounds. */
const READS_BESIDE = 400;
const HEAP_CAP_MB = 256;
/** The resident set may grow by at most this over the attack. */
const MAX_RSS_GROWTH = 128 * 1024 * 1024;

const LISTED_CLAIMS = `{ ${Array.from(
  { length: ALIASES },
  (_, i) => `a${i}: runs(first: ${RUNS}) { edges { node { claim { token } budget { spent } } } }`,
).join('\n')} }`;

let server: HostileServer;
const gql = (query: string, variables: Record<string, unknown> = {}, key = WRITER) => server.gql(query, variables, key);

describe.skipIf(onlyEmbedded)(`${RUNS} claimed runs listed with their claims and budgets through a READ key`, () => {
  beforeAll(async () => {
    server = await startHostileServer({
      heapMb: HEAP_CAP_MB,
      env: { RUNPLANE_API_KEYS: `${WRITER}=acme:write:writer,${READER}=acme:read,${OTHER}=globex` },
    });
    for (let from = 0; from < RUNS; from += 25) {
      await Promise.all(
        Array.from({ length: 25 }, async (_, i) => {
          const id = `claimed-${from + i}`;
          const created = await gql(`mutation { createRun(input: { id: "${id}", task: "t", budgetCap: 100 }) { __typename } }`);
          expect(created.data?.createRun?.__typename, JSON.stringify(created)).toBe('Run');
          const claimed = await gql(`mutation { claimRun(input: { runId: "${id}", holder: "w", ttlSeconds: 600 }) { __typename } }`);
          expect(claimed.data?.claimRun?.__typename, JSON.stringify(claimed)).toBe('RunClaim');
        }),
      );
    }
    for (let i = 0; i < 5; i++) await gql(`mutation { createRun(input: { task: "t", budgetCap: 1 }) { __typename } }`, {}, OTHER);
    // The listing index is eventually consistent: every run is listed before the attack.
    const listed = await gql(`{ runs(first: ${RUNS}) { edges { node { claim { token } } } } }`, {}, READER);
    expect(listed.data?.runs?.edges?.filter((e: { node: { claim: unknown } }) => e.node.claim).length).toBe(RUNS);
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
  });

  test(`${CLIENTS} clients, ${REQUESTS_PER_CLIENT} requests each of ${ALIASES} aliases: a handful of table requests per alias, the other tenant served, memory bounded`, async () => {
    const viewer = () => gql('{ viewer { tenant } }', {}, OTHER);
    const runs = () => gql('{ runs(first: 10) { edges { node { id } } } }', {}, OTHER);
    const baseline = { viewer: await timed(viewer, 20), runs: await timed(runs, 20) };
    const rssBefore = await server.rss();
    const readsBefore = await server.reads();
    const outcomes: string[] = [];
    const attack = Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let r = 0; r < REQUESTS_PER_CLIENT; r++) {
          const answer = await gql(LISTED_CLAIMS, {}, READER).catch((err: Error) => err);
          outcomes.push(answer instanceof Error ? `failed: ${answer.message}` : outcomeOf(answer));
          // Answered whole: every run with its claim.
          if (!(answer instanceof Error) && !answer.errors)
            expect(answer.data?.a0?.edges?.filter((e: { node: { claim: unknown } }) => e.node.claim).length).toBe(RUNS);
        }
      }),
    );
    const [viewerDuring, runsDuring, peakRss] = await Promise.all([
      timedWhile(viewer, attack),
      timedWhile(runs, attack),
      peakWhile(() => server.rss(), attack),
      attack,
    ]);
    const reads = (await server.reads()) - readsBefore;
    const executed = outcomes.filter((o) => o !== 'COST_LIMIT').length;
    const report = {
      outcomes,
      reads,
      readsPerAlias: reads / (executed * ALIASES),
      viewer: { baselineP99: p99(baseline.viewer), duringP99: p99(viewerDuring), n: viewerDuring.length },
      runs: { baselineP99: p99(baseline.runs), duringP99: p99(runsDuring), n: runsDuring.length },
      rssGrowthMb: (peakRss - rssBefore) / 2 ** 20,
    };
    console.log('hostile claims:', JSON.stringify(report));
    expect(server.alive(), server.main.output().slice(-2000)).toBe(true);
    for (const outcome of outcomes) expect(['answered', 'COST_LIMIT', 'LIMIT_EXCEEDED']).toContain(outcome);
    expect(reads, JSON.stringify(report)).toBeLessThanOrEqual(executed * ALIASES * READS_PER_ALIAS + READS_BESIDE);
    expect(p99(viewerDuring), JSON.stringify(report)).toBeLessThan(Math.max(500, 5 * p99(baseline.viewer)));
    expect(p99(runsDuring), JSON.stringify(report)).toBeLessThan(Math.max(500, 5 * p99(baseline.runs)));
    expect(peakRss - rssBefore, JSON.stringify(report)).toBeLessThan(MAX_RSS_GROWTH);
  }, 240_000);
});
