/**
 * The stall watcher's rounds, fair across tenants: one tenant's backlog of expired claims does
 * not delay another tenant's stall past its claim's TTL and one interval (plus the round's own
 * work), and the backlog's own runs are all found, at the watcher's pace, one run.stalled each.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { StallWatcher, type StallWatcherOptions } from '../../src/streams/stall-watcher.ts';
import { CLAIM_INDEX_SHARDS } from '../../src/table/keys.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const BIG = 'big-key-0123456789abcdef';
const SMALL = 'small-key-0123456789abcdef';
const INTERVAL_MS = 1_000;
/** Runs looked at per index shard and round: 40 a round, so a backlog takes many rounds. */
const PER_ROUND = 10;
/** Tenant big's claims that run out just before tenant small's one. */
const BACKLOG = 500;
const TTL_SECONDS = 4;
/** The round's own work on a busy 2-core machine, beyond the interval. */
const SLACK_MS = 1_500;
/** Requests in flight while setting up. */
const SETUP_CONCURRENCY = 16;

let api: TestServer;
let watcher: StallWatcher;
beforeAll(async () => {
  api = await startTestServer({
    env: { RUNPLANE_API_KEYS: `${BIG}=big:write:big,${SMALL}=small:write:small`, RUNPLANE_STALL_CHECK_SECONDS: '3600' },
  });
  // The server's own watcher lets its lease go; this one, with a small share per round, takes it.
  const { leases, runs } = (api.server.watcher as unknown as { options: StallWatcherOptions }).options;
  await api.server.watcher.stop();
  watcher = new StallWatcher({
    runs,
    leases,
    owner: 'fairness',
    intervalMs: INTERVAL_MS,
    perRound: PER_ROUND,
    log: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
  });
  watcher.start();
});
afterAll(() => watcher.stop());

const CLAIM = `mutation($input: ClaimRunInput!) { claimRun(input: $input) { __typename ... on RunClaim { expiresAt } } }`;
async function claim(runId: string, key: string) {
  const { data } = await api.gql(CLAIM, { input: { runId, holder: 'gone', ttlSeconds: TTL_SECONDS } }, { key });
  if (data?.claimRun?.__typename !== 'RunClaim') throw new Error(`could not claim ${runId}: ${JSON.stringify(data)}`);
  return Date.parse(data.claimRun.expiresAt);
}
const statusOf = async (runId: string, key: string) =>
  (await api.gql('query($id: ID!) { run(id: $id, consistent: true) { status } }', { id: runId }, { key })).data?.run?.status;

/** `work` over `items`, SETUP_CONCURRENCY at a time, results in order. */
async function each<T, R>(items: T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await work(items[i] as T);
  };
  await Promise.all(Array.from({ length: SETUP_CONCURRENCY }, worker));
  return results;
}

/** Ms from the claim's end until the run is seen STALLED. */
async function foundAfter(runId: string, key: string, endsAt: number) {
  await waitFor(async () => (await statusOf(runId, key)) === 'STALLED', { timeoutMs: 90_000, intervalMs: 20, what: `${runId} STALLED` });
  return Date.now() - endsAt;
}

test(`${BACKLOG} claims of one tenant running out first delay another tenant's stall by no more than one interval`, async () => {
  // Unloaded: small's run found within the interval (and the round's work).
  const alone = await newRun(api, { key: SMALL });
  const baseline = await foundAfter(alone, SMALL, await claim(alone, SMALL));

  const backlog = await each(
    Array.from({ length: BACKLOG }, () => null),
    () => newRun(api, { key: BIG }),
  );
  const late = await newRun(api, { key: SMALL });
  const stalledBefore = watcher.counts.stalled;
  const ends = await each(backlog, (runId) => claim(runId, BIG));
  const endsAt = await claim(late, SMALL);
  // The backlog is ahead of small's claim in the stall index.
  expect(Math.max(...ends)).toBeLessThanOrEqual(endsAt);

  const loaded = await foundAfter(late, SMALL, endsAt);
  const figures = `small's run found ${loaded} ms after its claim ran out behind ${BACKLOG} of big's, ${baseline} ms alone (x${(loaded / Math.max(1, baseline)).toFixed(1)})`;
  expect(loaded, figures).toBeLessThanOrEqual(INTERVAL_MS + SLACK_MS);

  // Every one of big's is found too, once each.
  await waitFor(() => watcher.counts.stalled - stalledBefore >= BACKLOG + 1, { timeoutMs: 90_000, what: "big's backlog stalled" });
  expect(await each(backlog, (runId) => statusOf(runId, BIG))).toEqual(backlog.map(() => 'STALLED'));
  const rounds = watcher.counts.rounds;
  await waitFor(() => watcher.counts.rounds >= rounds + 2, { what: 'two more rounds' });
  expect(watcher.counts.stalled - stalledBefore).toBe(BACKLOG + 1);
}, 240_000);

test('a backlog deeper than one read does not hide a claim that has just run out: the index is read at both ends', async () => {
  const own = await startTestServer({
    env: { RUNPLANE_API_KEYS: `${BIG}=big:write:big,${SMALL}=small:write:small`, RUNPLANE_STALL_CHECK_SECONDS: '3600' },
  });
  await own.server.watcher.stop();
  const runs = own.server.stores.runs;
  const perEnd = 2;
  const claimOn = async (runId: string, key: string) => {
    const { data } = await own.gql(CLAIM, { input: { runId, holder: 'gone', ttlSeconds: 1 } }, { key });
    return Date.parse(data.claimRun.expiresAt);
  };
  const backlog = await each(
    Array.from({ length: 40 }, () => null),
    () => newRun(own, { key: BIG }),
  );
  const late = await newRun(own, { key: SMALL });
  await each(backlog, (runId) => claimOn(runId, BIG));
  const endsAt = await claimOn(late, SMALL);
  await waitFor(() => Date.now() > endsAt, { what: "small's claim to run out" });
  const read = await runs.expiredClaims(Date.now(), perEnd);
  expect(read.map((item) => item.runId)).toContain(late);
  // Bounded: both ends of each index shard, each claim once, oldest first.
  expect(read.length).toBeLessThanOrEqual(2 * perEnd * CLAIM_INDEX_SHARDS);
  expect(new Set(read.map((item) => item.runId)).size).toBe(read.length);
  const ends = read.map((item) => item.claim.expiresAt.getTime());
  expect(ends).toEqual([...ends].sort((a, b) => a - b));
});
