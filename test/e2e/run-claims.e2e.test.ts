/**
 * Run claims across three replica processes on one table and one Redis: a cancellation made on
 * one replica reaches the worker holding the run through another, and its next write is
 * refused; a worker SIGKILLed mid-run is found STALLED within its claim's TTL and one watcher
 * interval, with exactly one run.stalled however many replicas watch, and another worker takes
 * it over at the next seq.
 */

import { spawn } from 'node:child_process';
import { createRunplane, RunplaneError } from 'runplane/client';
import { describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { uniqueName } from '../support/aws.ts';
import { leftoversAfterEach } from '../support/leftovers.ts';
import { noRedis, redisForFile } from '../support/redis.ts';
import { type Replica, startReplica, stopReplica } from '../support/replicas.ts';
import { newRun as createRun } from '../support/runs.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

/** The watchers look every second here. */
const STALL_CHECK_SECONDS = 1;
// Long enough that a renewal every third of it gets through on a loaded machine (a worker that lost its claim stops).
const WORKER_TTL_SECONDS = 4;
/** Room for a machine shared with other test files (process scheduling, not the design). */
const LOADED_MACHINE_MS = 3_000;

const redis = redisForFile();
const leftovers = leftoversAfterEach();

async function cluster() {
  const table = uniqueName('claims');
  const env = { RUNPLANE_STALL_CHECK_SECONDS: String(STALL_CHECK_SECONDS) };
  const first = await startReplica({ table, redisUrl: redis.url, env });
  const rest = await Promise.all([1, 2].map(() => startReplica({ table, redisUrl: redis.url, env })));
  const replicas = [first, ...rest];
  leftovers.push(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
  });
  return replicas;
}

const client = (replica: Replica) => {
  const c = createRunplane({ url: replica.url, webSocketImpl: WebSocket, retry: { baseDelayMs: 20, maxDelayMs: 200 } });
  leftovers.push(() => c.close());
  return c;
};

const newRun = (replica: Replica) => createRun(replica, { budgetCap: 100 });

const eventTypes = async (replica: Replica, runId: string) =>
  (
    (
      await replica.gql<{ run: { events: { edges: { node: { seq: number; type: string } }[] } } }>(
        `{ run(id: "${runId}", consistent: true) { events(first: 500) { edges { node { seq type } } } } }`,
      )
    ).data?.run.events.edges ?? []
  ).map((e) => e.node);

describe.skipIf(noRedis)('run claims over replicas', () => {
  test('a cancellation on one replica aborts the holder`s withRun on another, and its next write is refused', async () => {
    const [a, b] = await cluster();
    const runId = await newRun(a as Replica);
    const worker = client(a as Replica);
    const ops = client(b as Replica);
    let late: unknown;
    // A dashboard on the worker's replica: the cancel's rows come through Redis, yet as one change.
    const dashboard = wsClient((a as Replica).url);
    leftovers.push(async () => {
      await dashboard.dispose();
    });
    const states = subscribeWs<{ status: string; claim: { holder: string } | null }>(
      dashboard,
      `subscription { runChanged(runId: "${runId}") { status claim { holder } } }`,
      {},
      'runChanged',
    );
    const working = worker.withRun({ runId, holder: 'w', ttlSeconds: 30 }, async (run, signal) => {
      await run.append({ type: 'step' });
      await waitFor(() => states.items.some((s) => s.claim?.holder === 'w'), { what: 'the claim in runChanged' });
      expect(await ops.cancelRun({ runId, reason: 'stop' })).toMatchObject({ __typename: 'Run', status: 'CANCELLED' });
      await waitFor(() => signal.aborted, { what: 'the cancellation to reach the worker on the other replica' });
      late = await run.append({ type: 'late' });
    });
    const failure = await working.catch((err) => err);
    expect(failure).toBeInstanceOf(RunplaneError);
    expect(failure.code).toBe('RUN_CANCELLED');
    expect(late).toMatchObject({ __typename: 'ClaimLost' });
    expect((await eventTypes(b as Replica, runId)).map((e) => e.type)).toEqual(['step', 'run.cancelled']);
    await waitFor(() => states.items.some((s) => s.status === 'CANCELLED'), { what: 'the cancellation in runChanged' });
    // Never the run still RUNNING with its claim ended, nor CANCELLED twice.
    expect(states.items.slice(states.items.findIndex((s) => s.claim?.holder === 'w'))).toEqual([
      { status: 'RUNNING', claim: { holder: 'w' } },
      { status: 'CANCELLED', claim: null },
    ]);
  });

  test('a worker SIGKILLed mid-run: STALLED within its TTL and one interval, one run.stalled, taken over at the next seq', async () => {
    const replicas = await cluster();
    const [a, b, c] = replicas as [Replica, Replica, Replica];
    const runId = await newRun(a);
    const child = spawn(
      process.execPath,
      [...nodeArgs('test/support/claim-worker.ts'), a.url, runId, 'doomed', String(WORKER_TTL_SECONDS)],
      {
        env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      },
    );
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    leftovers.push(async () => {
      child.kill('SIGKILL');
      await exited;
    });
    await waitFor(
      () => {
        if (/failed: |stopped: /.test(output)) throw new Error(`the worker gave up:\n${output}`);
        return /appended 3/.test(output);
      },
      { timeoutMs: 60_000, what: 'the worker to append' },
    );
    const token = Number(/claimed (\d+)/.exec(output)?.[1]);
    child.kill('SIGKILL');
    await exited;
    const killedAt = Date.now();
    const status = async () =>
      (await b.gql<{ run: { status: string } }>(`{ run(id: "${runId}", consistent: true) { status } }`)).data?.run.status;
    await waitFor(async () => (await status()) === 'STALLED', { timeoutMs: 60_000, intervalMs: 50, what: 'the run to be found stalled' });
    expect(Date.now() - killedAt).toBeLessThanOrEqual((WORKER_TTL_SECONDS + STALL_CHECK_SECONDS) * 1000 + LOADED_MACHINE_MS);
    // Three replicas watch; one holds the watcher's lease. Whatever happens, one run.stalled.
    const stalledSum = async () => {
      let sum = 0;
      for (const r of replicas) sum += (await r.metrics()).get('runplane_runs_stalled_total') ?? 0;
      return sum;
    };
    expect(await stalledSum()).toBe(1);
    const before = await eventTypes(c, runId);
    expect(before.filter((e) => e.type === 'run.stalled')).toHaveLength(1);
    const last = before.at(-1)?.seq ?? 0;

    const taker = client(c);
    const result = await taker.withRun({ runId, holder: 'rescuer', ttlSeconds: 30 }, async (run) => {
      expect(run.claim.token).toBeGreaterThan(token);
      const appended = await run.append({ type: 'rescued' });
      return appended.__typename === 'Event' ? appended.seq : -1;
    });
    const after = await eventTypes(c, runId);
    expect(after.slice(before.length).map((e) => e.type)).toEqual(['run.reclaimed', 'rescued']);
    expect(result).toBe(last + 2);
    // The dead worker's token writes nothing any more.
    const stale = await a.gql<{ appendEvent: { __typename: string } }>(
      `mutation { appendEvent(input: { runId: "${runId}", type: "zombie", fencingToken: ${token} }) { __typename } }`,
    );
    expect(stale.data?.appendEvent.__typename).toBe('ClaimLost');
    expect(await stalledSum()).toBe(1);
  });
});
