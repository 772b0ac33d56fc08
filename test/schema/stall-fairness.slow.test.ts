/**
 * The stall watcher's rounds, fair across tenants: one tenant's backlog of expired claims does
 * not delay another tenant's stall past one interval (plus the round's own work), and the
 * backlog's own runs are all found, at the watcher's pace, one run.stalled each. The claims are
 * written straight into the table (bench/hostile/rows.ts), already run out, while no watcher
 * looks; the delay is timed from the start of a watcher's rounds.
 */
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { claimedRunRows, putRows } from '../../bench/hostile/rows.ts';
import { StallWatcher, type StallWatcherOptions } from '../../src/jobs/stall-watcher.ts';
import { CLAIM_INDEX_SHARDS } from '../../src/table/keys.ts';
import { dynamoClient, uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const BIG = 'big-key-0123456789abcdef';
const SMALL = 'small-key-0123456789abcdef';
const INTERVAL_MS = 500;
/** Runs looked at per index shard and round: 8 a round, so a backlog takes many rounds (10 here, 5 s: before the turns by tenant, small's wait). */
const PER_ROUND = 2;
/** Tenant big's claims that ran out just before tenant small's one. */
const BACKLOG = 80;
/** The round's own work on a busy 2-core machine, beyond the interval. */
const SLACK_MS = 1_500;
/** Requests in flight while reading statuses. */
const SETUP_CONCURRENCY = 16;

let api: TestServer;
let watching: Pick<StallWatcherOptions, 'runs' | 'leases'>;
let watcher: StallWatcher | undefined;
beforeAll(async () => {
  api = await startTestServer({
    env: { RUNPLANE_API_KEYS: `${BIG}=big:write:big,${SMALL}=small:write:small`, RUNPLANE_STALL_CHECK_SECONDS: '3600' },
  });
  // The server's own watcher lets its lease go; the test's, with a small share per round, take it.
  watching = (api.server.watcher as unknown as { options: StallWatcherOptions }).options;
  await api.server.watcher.stop();
});
afterAll(() => watcher?.stop());

/** A watcher of the test's own, its rounds starting now (the one before stopped): when it started. */
async function startWatcher() {
  await watcher?.stop();
  watcher = new StallWatcher({
    ...watching,
    owner: 'fairness',
    intervalMs: INTERVAL_MS,
    perRound: PER_ROUND,
    log: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
  });
  const startedAt = Date.now();
  watcher.start();
  return { watcher, startedAt };
}

/** Claimed runs of `tenant` written into `table`, each claim ending at its `untilMs`: their ids. */
async function claimedRuns(table: string, tenant: string, ends: number[]) {
  const ids = ends.map(() => uniqueName('run'));
  const rows = ids.flatMap((runId, i) => claimedRunRows(tenant, runId, { untilMs: ends[i] as number, holder: 'gone' }));
  await putRows(DynamoDBDocumentClient.from(dynamoClient()), table, rows);
  return ids;
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

/** Ms from `since` until the run is seen STALLED. */
async function foundAfter(runId: string, key: string, since: number) {
  await waitFor(async () => (await statusOf(runId, key)) === 'STALLED', { timeoutMs: 90_000, intervalMs: 20, what: `${runId} STALLED` });
  return Date.now() - since;
}

test(`${BACKLOG} claims of one tenant that ran out first delay another tenant's stall by no more than one interval`, async () => {
  // Unloaded: small's run found in a watcher's first round.
  const [alone] = (await claimedRuns(api.table, 'small', [Date.now() - 1])) as [string];
  const baseline = await foundAfter(alone, SMALL, (await startWatcher()).startedAt);

  // No watcher looking, big's claims ran out one after the other, each before small's: all of them ahead of it in the stall index.
  await watcher?.stop();
  const endedAt = Date.now() - 1;
  const [backlog, [late]] = await Promise.all([
    claimedRuns(
      api.table,
      'big',
      Array.from({ length: BACKLOG }, (_, i) => endedAt - BACKLOG + i),
    ),
    claimedRuns(api.table, 'small', [endedAt]) as Promise<[string]>,
  ]);
  const { watcher: loadedWatcher, startedAt } = await startWatcher();
  const loaded = await foundAfter(late, SMALL, startedAt);
  const figures = `small's run found ${loaded} ms after the watcher started, behind ${BACKLOG} of big's, ${baseline} ms alone (x${(loaded / Math.max(1, baseline)).toFixed(1)})`;
  console.log(figures);
  expect(loaded, figures).toBeLessThanOrEqual(INTERVAL_MS + SLACK_MS);

  // Every one of big's is found too, once each.
  const { counts } = loadedWatcher;
  await waitFor(() => counts.stalled >= BACKLOG + 1, { timeoutMs: 90_000, what: "big's backlog stalled" });
  expect(await each(backlog, (runId) => statusOf(runId, BIG))).toEqual(backlog.map(() => 'STALLED'));
  const rounds = counts.rounds;
  await waitFor(() => counts.rounds >= rounds + 2, { what: 'two more rounds' });
  expect(counts.stalled).toBe(BACKLOG + 1);
}, 120_000);

test('a backlog deeper than one read does not hide a claim that has just run out: the index is read at both ends', async () => {
  const own = await startTestServer({
    env: { RUNPLANE_API_KEYS: `${BIG}=big:write:big,${SMALL}=small:write:small`, RUNPLANE_STALL_CHECK_SECONDS: '3600' },
  });
  await own.server.watcher.stop();
  const runs = own.server.stores.runs;
  const perEnd = 2;
  // 40 of big's claims end before small's, all within a moment.
  const endsAt = Date.now() + 500;
  await claimedRuns(
    own.table,
    'big',
    Array.from({ length: 40 }, (_, i) => endsAt - 40 + i),
  );
  const [late] = await claimedRuns(own.table, 'small', [endsAt]);
  await waitFor(() => Date.now() > endsAt, { what: "small's claim to run out" });
  const read = await runs.expiredClaims(Date.now(), perEnd);
  expect(read.map((item) => item.runId)).toContain(late);
  // Bounded: both ends of each index shard, each claim once, oldest first.
  expect(read.length).toBeLessThanOrEqual(2 * perEnd * CLAIM_INDEX_SHARDS);
  expect(new Set(read.map((item) => item.runId)).size).toBe(read.length);
  const ends = read.map((item) => item.claim.expiresAt.getTime());
  expect(ends).toEqual([...ends].sort((a, b) => a - b));
});
