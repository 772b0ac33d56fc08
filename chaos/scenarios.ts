/**
 * The faults, one scenario each, and the run of one scenario: start the cluster, put load
 * on it, break something in the middle, heal it, let every client finish, then check the
 * invariants over the history and the table.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient } from '../harness/clients.ts';
import { sealEntry } from '../src/streams/fanout/entries.ts';
import { eventItem, eventShardsOf } from '../src/table/codec.ts';
import { keys } from '../src/table/keys.ts';
import {
  checkAppends,
  checkBudgets,
  checkClaims,
  checkDeliveryLatency,
  checkLeases,
  checkMutualExclusion,
  checkSubscriptions,
  type Snapshot,
} from './checkers.ts';
import { graphql, sleep } from './client.ts';
import { type Cluster, startCluster } from './cluster.ts';
import { History } from './history.ts';
import { checkOutput, startOutputLoad, storedOutput } from './output.ts';
import { checkShardLeases } from './shard-leases.ts';
import { startWorkload } from './workload.ts';

export interface Scenario {
  name: string;
  what: string;
  /** Breaks things while the load runs (`ms` long); returns how many faults it caused. */
  fault(cluster: Cluster, ms: number): Promise<number>;
  stallChance?: number;
  /** How often the prober appends to the probe run (default every 1.2 s). */
  probeEveryMs?: number;
  /**
   * Checks that the probe's connected subscriber gets each probe event within this long, or
   * within three times the slowest delivery before the first fault (a loaded machine is slow
   * throughout; a poller held up by the fault is slow only after it). The fault must wait a
   * fifth of the load before it starts.
   */
  maxDeliveryMs?: number;
  /** Settings of the API servers for this scenario. */
  serverEnv?: Record<string, string>;
  /** API servers (default 2); with `redis`, they coordinate through a Redis of the cluster's own. */
  servers?: number;
  redis?: boolean;
  /** Arguments of the engine process (its throughput model). */
  engineArgs?: string[];
  /** Event shards of the runs the workload appends to (default 1). */
  eventShards?: number;
  /** Readers that stop reading now and then, on a run of large events (the scenario must make their feeds fall behind). */
  stalledReaders?: { readers: number; copies: number; padBytes: number };
}

/** Faults injected into the engine for a window in the middle of the load; returns the calls they hit. */
async function window(cluster: Cluster, ms: number, rules: Parameters<Cluster['inject']>[0][]) {
  await sleep(ms / 4);
  const faults = await Promise.all(rules.map((rule) => cluster.inject(rule)));
  await sleep(ms / 2);
  const hits = await Promise.all(faults.map((fault) => cluster.remove(fault)));
  return hits.reduce((a, b) => a + b, 0);
}

const WRITES = ['PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems'];

export const scenarios: Scenario[] = [
  {
    name: 'engine-restart',
    what: 'the engine is killed (SIGKILL) mid-load and started again on its data',
    async fault(cluster, ms) {
      await sleep(ms / 3);
      await cluster.killEngine();
      await sleep(400);
      await cluster.startEngine();
      return 1;
    },
  },
  {
    name: 'server-restart',
    what: 'an API server is killed (SIGKILL) mid-load and started again',
    async fault(cluster, ms) {
      await sleep(ms / 3);
      await cluster.killServer(0);
      await sleep(300);
      await cluster.startServer(0);
      return 1;
    },
  },
  {
    name: 'throttling',
    what: 'DynamoDB throttles a third of all requests for a while',
    fault: (cluster, ms) =>
      window(cluster, ms, [
        { operations: [...WRITES, 'GetItem', 'Query'], error: 'ThrottlingException', probability: 0.2 },
        { operations: WRITES, error: 'ProvisionedThroughputExceededException', probability: 0.15 },
      ]),
  },
  {
    name: 'partition-limits',
    what: "the engine's throughput model is on at 5 write units a partition a second, runs alpha and beta over 4 event shards",
    engineArgs: ['--partition-limits', '--partition-wcu', '5', '--partition-rcu', '600'],
    eventShards: 4,
    // The faults are the throttles the servers met (and retried), counted on their /metrics.
    async fault(cluster, ms) {
      await sleep(ms);
      const counts = await Promise.all(
        cluster.urls.map((url) =>
          fetch(new URL('/metrics', url))
            .then((r) => r.text())
            .then((text) => [...text.matchAll(/^runplane_dynamodb_throttles_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0))
            .catch(() => 0),
        ),
      );
      return counts.reduce((a, b) => a + b, 0);
    },
  },
  {
    name: 'transaction-conflicts',
    what: 'TransactWriteItems meets TransactionConflict for a while, as under contention',
    fault: (cluster, ms) =>
      window(cluster, ms, [{ operations: ['TransactWriteItems'], error: 'TransactionConflictException', probability: 0.4 }]),
  },
  {
    name: 'iterator-expiry',
    what: "the stream poller's iterators expire again and again, and a shard rolls over",
    // An expired iterator is re-opened where it was: events are not held up while iterators
    // expire. 5 s, not 1 s: a loaded 2-core machine has stalled a delivery 1.03 s with nothing
    // wrong, and 3.3 s with the whole suite running beside it (a lost iterator costs seconds).
    maxDeliveryMs: 5_000,
    probeEveryMs: 200,
    async fault(cluster, ms) {
      let faults = 0;
      const until = performance.now() + ms * 0.8;
      await sleep(ms / 5);
      await cluster.rolloverShard();
      faults++;
      while (performance.now() < until) {
        await cluster.expireIterators();
        faults++;
        await sleep(150);
      }
      return faults;
    },
  },
  {
    name: 'lost-responses',
    what: 'writes are applied but their answers are lost (the SDK resends, clients retry with their keys)',
    fault: (cluster, ms) => window(cluster, ms, [{ operations: WRITES, error: 'InternalServerError', after: true, probability: 0.5 }]),
  },
  {
    name: 'stalled-readers',
    what: 'subscribers stop reading their socket for seconds at a time while large events flow, then read on',
    // A small send buffer: the stalled readers' feeds fall back to the table within a stall.
    // Pings far apart: a stall of up to 11.5 s must stay a stall, not become a cut connection.
    serverEnv: { RUNPLANE_SEND_BUFFER_BYTES: '262144', RUNPLANE_WS_PING_SECONDS: '120' },
    stalledReaders: { readers: 2, copies: 20, padBytes: 24 * 1024 },
    async fault(_cluster, ms) {
      await sleep(ms);
      return 0;
    },
  },
  {
    name: 'replicas-redis',
    what: 'three replicas share the stream through Redis: the shard owner is killed (SIGKILL) twice and Redis once, each started again',
    servers: 3,
    redis: true,
    async fault(cluster, ms) {
      let faults = 0;
      const killOwner = async () => {
        const owner = await cluster.shardOwner();
        if (owner === undefined) return;
        await cluster.killServer(owner);
        faults++;
        await sleep(300);
        await cluster.startServer(owner);
      };
      await sleep(ms / 5);
      await killOwner();
      await sleep(ms / 5);
      await cluster.killRedis();
      faults++;
      await sleep(500);
      await cluster.startRedis();
      await sleep(ms / 5);
      await killOwner();
      return faults;
    },
  },
  {
    name: 'redis-full',
    what: 'Redis fills up (maxmemory, noeviction) and refuses every write for a while: no fan-out, no heartbeat, no resync entry',
    servers: 3,
    redis: true,
    async fault(cluster, ms) {
      await sleep(ms / 4);
      await cluster.redisCommand('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
      await cluster.redisCommand('CONFIG', 'SET', 'maxmemory', 1);
      await sleep(ms / 2);
      await cluster.redisCommand('CONFIG', 'SET', 'maxmemory', 0);
      return 1;
    },
  },
  {
    name: 'redis-forgery',
    what: 'someone who can reach Redis writes forged entries (the old format, a guessed seal, 1 MB of junk), replays real ones, and deletes real ones',
    servers: 3,
    redis: true,
    async fault(cluster, ms) {
      await sleep(ms / 5);
      const until = performance.now() + (ms * 3) / 5;
      let faults = 0;
      const key = cluster.redisStream;
      while (performance.now() < until) {
        const recent = ((await cluster.redisCommand('XREVRANGE', key, '+', '-', 'COUNT', 20)) ?? []) as [string, string[]][];
        // The next seq of a run a real entry names: a forged event there would be taken for the next one.
        const real = recent
          .map(([, fields]) => fields[fields.indexOf('value') + 1] ?? '')
          .find((value) => value.includes('"kind":"event"'));
        const named = real ? (JSON.parse(real) as { runId: string; event: { seq: number } }) : { runId: 'alpha', event: { seq: 1 } };
        const forged = JSON.stringify({
          kind: 'event',
          tenant: 'default',
          runId: named.runId,
          event: {
            runId: named.runId,
            seq: named.event.seq + 1,
            type: 'forged',
            payload: { op: 'forged' },
            createdAt: new Date().toISOString(),
          },
        });
        await cluster.redisCommand('XADD', key, '*', 'from', 'forger', 'c', forged);
        await cluster.redisCommand(
          'XADD',
          key,
          '*',
          ...sealEntry('a-guess-at-the-replicas-secret', key, {
            from: 'forger',
            n: ++faults,
            at: Date.now(),
            kind: 'change',
            value: forged,
          }),
        );
        if (faults % 10 === 0) await cluster.redisCommand('XADD', key, '*', 'from', 'forger', 'c', 'x'.repeat(1024 * 1024));
        const [newest] = recent;
        if (newest) {
          // Replayed as it was (a repeat), and deleted (a gap the replicas must notice).
          await cluster.redisCommand('XADD', key, '*', ...newest[1]);
          if (faults % 3 === 0) await cluster.redisCommand('XDEL', key, newest[0]);
        }
        faults += 3;
        await sleep(50);
      }
      return faults;
    },
  },
  {
    name: 'lease-stalls',
    what: 'lease workers stall past their lease (and crash) half of the time',
    stallChance: 0.5,
    async fault(_cluster, ms) {
      await sleep(ms);
      return 0;
    },
  },
];

export interface Report {
  scenario: string;
  seconds: number;
  requests: number;
  acknowledgedWrites: number;
  /** Acknowledged operations by kind (append, charge, acquire, renew, release). */
  acknowledgedByKind: Record<string, number>;
  refused: number;
  unknown: number;
  faults: number;
  /** Lease workers that stalled past their lease / crashed holding one. */
  stalls: number;
  crashes: number;
  subscriberResumes: number;
  /** Code points the output writer wrote, and the times its readers resumed. */
  outputLength: number;
  outputResumes: number;
  /** Charges and appends refused at the cap (the cap check was exercised). */
  budgetRefusals: number;
  violations: string[];
  /** Seconds each phase took: the cluster's start, the load, keeping it on until exercised, draining, catching up, checking, stopping. */
  phases: Record<string, number>;
  /** Where the history was written when there were violations (times: performance.now() of the runner). */
  historyFile?: string;
  unexpected: string[];
}

async function snapshot(cluster: Cluster, runs: string[]): Promise<Snapshot> {
  const doc = documentClient(cluster.engineEndpoint);
  const events = new Map<string, { seq: number; op: string | null }[]>();
  const budgets = new Map<string, { cap: number; spent: number }>();
  const statuses = new Map<string, string>();
  try {
    const query = async (pk: string) => {
      const items: Record<string, unknown>[] = [];
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: cluster.table,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': pk },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
      } while (start);
      return items;
    };
    for (const runId of runs) {
      const items = await query(keys.runPartition('default', runId));
      // A run of several event shards keeps its events in their partitions.
      const shards = eventShardsOf(items.find((item) => item.sk === '#meta') ?? {});
      if (shards > 1) for (const pk of keys.eventPartitions('default', runId, shards)) items.push(...(await query(pk)));
      events.set(
        runId,
        items
          .filter((item) => String(item.sk).startsWith('evt#'))
          .map((item) => {
            const payload = item.payload as { op?: string; token?: unknown } | null;
            return {
              seq: Number(item.seq),
              op: payload?.op ?? null,
              type: String(item.type),
              token: typeof payload?.token === 'number' ? payload.token : undefined,
              at: Date.parse(String(item.createdAt)),
            };
          })
          // In seq order, as one partition's Query returns them, whichever shard each came from.
          .sort((a, b) => a.seq - b.seq),
      );
      const budget = items.find((item) => item.sk === '#budget');
      budgets.set(runId, { cap: Number(budget?.cap), spent: Number(budget?.spent) });
      statuses.set(runId, String(items.find((item) => item.sk === '#meta')?.status));
    }
  } finally {
    doc.destroy();
  }
  return { events, budgets, statuses };
}

/** The output stream as stored, read through the first server that answers (a dead one is reported by the readiness check), checked. */
async function checkStoredOutput(urls: string[], output: Parameters<typeof checkOutput>[0], runId: string, history: History) {
  const failures: string[] = [];
  for (const url of urls) {
    try {
      return checkOutput(output, await storedOutput(url, runId, history));
    } catch (err) {
      failures.push(`${url}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return [`the output stream could not be read back through any server: ${failures.join('; ')}`];
}

/** Runs one scenario for `seconds` of load and checks it. */
export async function runScenario(scenario: Scenario, seconds: number, log: (line: string) => void = () => {}): Promise<Report> {
  const began = performance.now();
  const phases: Record<string, number> = {};
  let phaseFrom = began;
  const phase = (name: string) => {
    const now = performance.now();
    phases[name] = Number(((now - phaseFrom) / 1000).toFixed(2));
    phaseFrom = now;
  };
  const cluster = await startCluster(scenario.servers ?? 2, scenario.serverEnv, { redis: scenario.redis, engineArgs: scenario.engineArgs });
  phase('start');
  const history = new History();
  try {
    const runs = ['alpha', 'beta', 'gamma'];
    const claimRuns = ['claimed-1', 'claimed-2'];
    const probeRun = 'probe';
    const rawRun = 'raw';
    const bulkRun = 'bulk';
    const outputRun = 'output';
    const setup = graphql(() => cluster.urls[0] as string, history);
    for (const id of [...runs, ...claimRuns, probeRun, rawRun, bulkRun, outputRun]) {
      // gamma's cap is so low that its charger meets it within its first few charges.
      const created = await setup('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
        input: {
          id,
          task: 'chaos',
          budgetCap: id === 'gamma' ? 3 : 400,
          // gamma stays on its own partition: the checks see both layouts under the same load.
          ...(scenario.eventShards && (id === 'alpha' || id === 'beta') ? { eventShards: scenario.eventShards } : {}),
        },
      });
      if (created.failure) throw new Error(`could not create run ${id}: ${created.failure}`);
    }
    const workload = startWorkload({
      urls: cluster.urls,
      runs,
      claimRuns,
      units: ['u1', 'u2', 'u3', 'u4'],
      history,
      stallChance: scenario.stallChance,
      cappedRun: 'gamma',
      probeRun,
      probeEveryMs: scenario.probeEveryMs,
      stalled: scenario.stalledReaders && { runId: bulkRun, ...scenario.stalledReaders },
      raw: {
        runId: rawRun,
        // Conditional and idempotent: a put that finds its own row (a lost answer, resent) landed.
        async put(seq, op) {
          const doc = documentClient(cluster.engineEndpoint);
          try {
            const item = eventItem('default', { runId: rawRun, seq, type: 'raw', payload: { op }, createdAt: new Date() }, op);
            await doc.send(
              new PutCommand({
                TableName: cluster.table,
                Item: item,
                ConditionExpression: 'attribute_not_exists(pk) OR writeId = :w',
                ExpressionAttributeValues: { ':w': op },
              }),
            );
          } finally {
            doc.destroy();
          }
        },
      },
    });
    const output = startOutputLoad({ urls: cluster.urls, runId: outputRun, history });
    log(`${scenario.name}: load on, ${scenario.what}`);
    // How many feeds fell behind on the server the readers are on (a stalled-readers scenario must make some).
    let mostLagging = 0;
    const sampling = setInterval(() => {
      void fetch(new URL('/metrics', cluster.urls[1]))
        .then((r) => r.text())
        .then((text) => {
          mostLagging = Math.max(mostLagging, Number(/^runplane_subscriptions_lagging (\d+)/m.exec(text)?.[1] ?? 0));
        })
        .catch(() => undefined);
    }, 200);
    const loadFrom = performance.now();
    const faults = await Promise.all([scenario.fault(cluster, seconds * 1000), sleep(seconds * 1000)]).then(([n]) => n);
    phase('load');
    // A slow machine gets through less in the same seconds: the load stays on until it has
    // exercised what the checks rely on (every kind of write, the cap, a resume), or a minute more.
    const exercised = () =>
      (['append', 'charge', 'acquire', 'renew', 'release'] as const).every((kind) => history.count(kind, 'acknowledged') > 0) &&
      history.operations.some((o) => o.result?.__typename === 'BudgetExceeded') &&
      workload.subscriptions.some((s) => s.resumes > 0);
    const exerciseDeadline = performance.now() + 60_000;
    while (!exercised() && performance.now() < exerciseDeadline) await sleep(100);
    phase('exercise');
    // The faults are over: everything still under way must now get through on its own.
    await workload.stopLoad(30_000);
    await output.stop(30_000);
    phase('drain');
    const unresolved = history.operations.filter((o) => o.outcome === 'unknown' && o.input.idempotencyKey);
    // Subscribers catch up with the runs as they now stand, or the check below says what they missed.
    const watched = [...runs, ...claimRuns, probeRun, rawRun, ...(scenario.stalledReaders ? [bulkRun] : [])];
    let state = await snapshot(cluster, watched);
    const caughtUp = () => workload.subscriptions.every((s) => (s.events.at(-1)?.seq ?? 0) >= (state.events.get(s.runId)?.length ?? 0));
    const deadline = performance.now() + 30_000;
    while (!caughtUp() && performance.now() < deadline) await sleep(50);
    await workload.stopSubscribers();
    clearInterval(sampling);
    phase('catch-up');
    state = await snapshot(cluster, watched);
    const violations = [
      ...unresolved.map(
        (o) =>
          `${o.kind} by ${o.client} (${o.input.idempotencyKey}) never answered after the faults ended (${o.attempts} attempts, ${o.start.toFixed(0)}-${o.end.toFixed(0)} ms): ${o.failure}`,
      ),
      ...checkAppends(history, state),
      ...checkBudgets(history, state),
      ...checkLeases(history),
      ...checkMutualExclusion(history),
      ...checkClaims(history, state, claimRuns),
      ...(scenario.maxDeliveryMs
        ? checkDeliveryLatency(history, workload.subscriptions, probeRun, {
            maxMs: scenario.maxDeliveryMs,
            baselineUntil: loadFrom + (seconds * 1000) / 5,
          })
        : []),
      ...checkSubscriptions(workload.subscriptions, state, workload.lateFills),
      ...(await checkStoredOutput(cluster.urls, output, outputRun, history)),
      ...(scenario.redis ? await checkShardLeases(cluster.engineEndpoint, cluster.table) : []),
      ...(scenario.stalledReaders && mostLagging === 0
        ? [`the stalled readers (${workload.readerStalls} stalls) never made a feed fall behind: the scenario tested nothing`]
        : []),
    ];
    const readiness = await Promise.all(
      cluster.urls.map(
        async (url) =>
          (await fetch(new URL('/ready', url)).then(
            (r) => r.status,
            () => 0,
          )) === 200,
      ),
    );
    if (!readiness.every(Boolean)) violations.push(`a server is not ready after the faults ended: ${readiness.join(', ')}`);
    readiness.forEach((ready, i) => {
      if (!ready) violations.push(`server ${i}: ${cluster.serverLog(i)}`);
    });
    phase('check');
    // What it takes to find out why: the whole history, what subscribers got, the table.
    let historyFile: string | undefined;
    if (violations.length) {
      historyFile = join(mkdtempSync(join(tmpdir(), 'runplane-chaos-history-')), `${scenario.name}.json`);
      writeFileSync(
        historyFile,
        JSON.stringify({
          violations,
          operations: history.operations,
          subscriptions: workload.subscriptions,
          events: Object.fromEntries(state.events),
          budgets: Object.fromEntries(state.budgets),
        }),
      );
    }
    return {
      scenario: scenario.name,
      seconds: (performance.now() - began) / 1000,
      requests: history.requests,
      acknowledgedWrites: history.acknowledgedWrites,
      acknowledgedByKind: Object.fromEntries(
        (['append', 'charge', 'acquire', 'renew', 'release'] as const).map((kind) => [kind, history.count(kind, 'acknowledged')]),
      ),
      refused: history.operations.filter((o) => o.outcome === 'refused').length,
      unknown: history.operations.filter((o) => o.outcome === 'unknown').length,
      // A stalled reader is this scenario's fault.
      faults: faults + workload.readerStalls,
      stalls: workload.stalls + workload.runStalls,
      crashes: workload.crashes + workload.runCrashes,
      subscriberResumes: workload.subscriptions.reduce((n, s) => n + s.resumes, 0),
      outputLength: output.written.length,
      outputResumes: output.readers.reduce((n, r) => n + r.resumes, 0),
      budgetRefusals: history.operations.filter((o) => o.result?.__typename === 'BudgetExceeded').length,
      violations,
      historyFile,
      unexpected: history.unexpected,
      // Completed below, as the cluster stops.
      phases,
    };
  } finally {
    await cluster.stop();
    phase('stop');
  }
}
