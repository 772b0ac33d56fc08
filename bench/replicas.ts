/**
 * Replicas on one table: an event appended through replica A, timed until a subscriber on
 * replica B has it, and the GetRecords calls the replicas make together. Measured twice in the
 * same run on one engine process: two replicas as they work without Redis (each polls every
 * shard; B learns of A's writes from the stream), and three replicas sharing one Redis (one
 * reads each shard; A's writes reach B over Redis at once).
 */
import { randomBytes } from 'node:crypto';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { freePort } from '../harness/clients.ts';
import { type StartedProcess, startProcess } from '../harness/processes.ts';
import { startRedisProcess } from '../harness/redis.ts';
import { percentile } from '../harness/stats.ts';

export interface ReplicaFigures {
  p50: number;
  p99: number;
  /** GetRecords a second, summed over the replicas. */
  getRecordsPerSecond: number;
  replicas: number;
}

export interface ReplicasResult {
  /** Two replicas without Redis: B learns of A's writes from the stream (today's path). */
  streamPath: ReplicaFigures;
  /** Three replicas with Redis. */
  redis: ReplicaFigures;
  samples: number;
}

async function gql(url: string, query: string, variables: Record<string, unknown>) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

async function getRecords(url: string) {
  const text = await (await fetch(new URL('/metrics', url))).text();
  return Number(/^runplane_stream_getrecords_total (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

async function replica(engineEndpoint: string, table: string, env: Record<string, string>) {
  const up = /Runplane is up: (\S+)/;
  const child = await startProcess(
    'src/main.ts',
    { PORT: '0', AWS_ENDPOINT_URL_DYNAMODB: engineEndpoint, RUNPLANE_TABLE: table, RUNPLANE_GRAPHIQL: 'false', ...env },
    [up],
    [],
    { quiet: true },
  );
  return { child, url: up.exec(child.output())?.[1] as string };
}

/** Appends through `writer` and times each event to a subscriber on `reader`; counts every replica's GetRecords meanwhile. */
async function measure(urls: string[], samples: number): Promise<ReplicaFigures> {
  const [writer, reader] = urls as [string, string];
  const runId = `bench-${randomBytes(4).toString('hex')}`;
  await gql(writer, 'mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'replicas', budgetCap: 1 },
  });
  const client = createClient({ url: reader.replace(/^http/, 'ws'), webSocketImpl: WebSocket, lazy: false, retryAttempts: 0 });
  const arrivals = new Map<number, (at: number) => void>();
  const dispose = client.subscribe<{ runEvents: { seq: number } }>(
    { query: 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq } }', variables: { runId } },
    { next: (r) => arrivals.get(r.data?.runEvents.seq as number)?.(performance.now()), error: (e) => console.error(e), complete: () => {} },
  );
  const append = () =>
    gql(writer, 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', { input: { runId, type: 'x' } });
  const wait = (seq: number) => new Promise<number>((resolve) => arrivals.set(seq, resolve));
  let seq = 0;
  for (let i = 0; i < 10; i++) {
    const arrived = wait(++seq);
    await append();
    await arrived;
  }
  const before = await Promise.all(urls.map(getRecords));
  const from = performance.now();
  const latencies: number[] = [];
  for (let i = 0; i < samples; i++) {
    // Spaced at random, so that writes meet the pollers at every point of their cycle.
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 180));
    const arrived = wait(++seq);
    const started = performance.now();
    await append();
    latencies.push((await arrived) - started);
  }
  const seconds = (performance.now() - from) / 1000;
  const after = await Promise.all(urls.map(getRecords));
  dispose();
  await client.dispose();
  const calls = after.reduce((sum, n, i) => sum + n - (before[i] as number), 0);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), getRecordsPerSecond: calls / seconds, replicas: urls.length };
}

export async function replicasBench(samples = 80): Promise<ReplicasResult> {
  const enginePort = await freePort();
  const engine: StartedProcess = await startProcess(
    'packages/engine/src/cli.ts',
    {},
    [/Streams on http/],
    ['--port', String(enginePort), '--in-memory'],
    {
      quiet: true,
    },
  );
  const engineEndpoint = `http://127.0.0.1:${enginePort}`;
  const redis = await startRedisProcess(await freePort());
  const started: StartedProcess[] = [];
  try {
    const alone = [await replica(engineEndpoint, 'alone', {})];
    alone.push(await replica(engineEndpoint, 'alone', {}));
    started.push(...alone.map((r) => r.child));
    const streamPath = await measure(
      alone.map((r) => r.url),
      samples,
    );
    await Promise.all(alone.map((r) => r.child.stop()));
    const env = { RUNPLANE_REDIS_URL: redis.url, RUNPLANE_REDIS_SECRET: 'replicas-of-the-benchmark-share-this-secret' };
    const shared = [await replica(engineEndpoint, 'shared', env)];
    shared.push(...(await Promise.all([1, 2].map(() => replica(engineEndpoint, 'shared', env)))));
    started.push(...shared.map((r) => r.child));
    const withRedis = await measure(
      shared.map((r) => r.url),
      samples,
    );
    return { streamPath, redis: withRedis, samples };
  } finally {
    await Promise.all(started.map((p) => p.stop()));
    await redis.kill();
    await engine.stop();
  }
}

/** The `replicas` section's rows: [benchmark, result, baseline, ratio], and its figures. */
export async function replicasSection(step: (what: string) => void) {
  step('replicas: appendEvent through one, subscriber on another; 2 without Redis, then 3 with');
  const result = await replicasBench();
  const ms = (v: number) => `${v.toFixed(1)} ms`;
  const { streamPath, redis } = result;
  // Both replicas without Redis poll the same shard alike: one replica alone makes half the sum.
  const oneAlone = streamPath.getRecordsPerSecond / streamPath.replicas;
  const rows: [string, string, string, string][] = [
    [
      'write through replica A -> subscriber on B, 3 replicas + Redis (p50 / p99)',
      `${ms(redis.p50)} / ${ms(redis.p99)}`,
      `without Redis (the stream path): ${ms(streamPath.p50)} / ${ms(streamPath.p99)}`,
      `${(redis.p99 / streamPath.p99).toFixed(2)}x (p99; target p99 < 50 ms)`,
    ],
    [
      'GetRecords/s on the one shard, sum over 3 replicas + Redis',
      `${redis.getRecordsPerSecond.toFixed(2)}/s`,
      `1 replica alone: ${oneAlone.toFixed(2)}/s`,
      `${(redis.getRecordsPerSecond / oneAlone).toFixed(2)}x (target 1.00x)`,
    ],
  ];
  return { rows, result: { ...result, getRecordsPerSecondOneAlone: oneAlone } };
}
