/**
 * Run claims: what a fence costs an append (fenced against unfenced, alternating, on one
 * server, its engine in memory, then on disk); how long a cancellation takes to reach the
 * worker holding the run (cancelRun sent to withRun's signal aborted, on the worker's replica
 * and across two replicas through Redis); and how long after a worker's claim ran out the
 * stall watcher finds its run (against the stated bound: one watcher interval).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRunplane } from '@runplane/client';
import WebSocket from 'ws';
import { freePort, graphqlClient } from '../harness/clients.ts';
import { type StartedProcess, startProcess, startServerProcess } from '../harness/processes.ts';
import { startRedisProcess } from '../harness/redis.ts';
import { percentile } from '../harness/stats.ts';

const id = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;
const stats = (xs: number[]) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99), samples: xs.length });

const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';

/** Two runs alike, the second claimed (its token fences the appends to it). */
async function fencedPair(url: string, plainName: string, fencedName: string) {
  const gql = graphqlClient(url);
  const [plain, fenced] = [id(plainName), id(fencedName)];
  for (const runId of [plain, fenced])
    await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
      input: { id: runId, task: 'bench', budgetCap: 1 },
    });
  const claimed = await gql('mutation($input: ClaimRunInput!) { claimRun(input: $input) { ... on RunClaim { token } } }', {
    input: { runId: fenced, holder: 'bench', ttlSeconds: 3600 },
  });
  return { gql, plain, fenced, token: (claimed as { claimRun: { token: number } }).claimRun.token };
}

/** Fenced and unfenced appends alternately, one run each, so both meet the same load. */
async function fencedAppends(url: string, samples: number) {
  const { gql, plain, fenced, token } = await fencedPair(url, 'plain', 'fenced');
  const append = (runId: string, fencingToken?: number) => gql(APPEND, { input: { runId, type: 'step', payload: { n: 1 }, fencingToken } });
  for (let i = 0; i < 100; i++) {
    await append(plain);
    await append(fenced, token);
  }
  const times = { plain: [] as number[], fenced: [] as number[] };
  for (let i = 0; i < samples; i++) {
    const order = i % 2 ? (['plain', 'fenced'] as const) : (['fenced', 'plain'] as const);
    for (const which of order) {
      const started = performance.now();
      await (which === 'plain' ? append(plain) : append(fenced, token));
      times[which].push(performance.now() - started);
    }
  }
  return { plain: stats(times.plain), fenced: stats(times.fenced), ratio: percentile(times.fenced, 50) / percentile(times.plain, 50) };
}

/**
 * The same with 16 writers at once on each run (group commit: a batch is one transaction either
 * way, and a fenced batch adds one claim check): appends a second and p50, alternating rounds.
 */
async function concurrentFencedAppends(url: string, rounds: number, writers = 16, perWriter = 20) {
  const { gql, plain, fenced, token } = await fencedPair(url, 'plain-many', 'fenced-many');
  const round = async (runId: string, fencingToken?: number) => {
    const times: number[] = [];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: writers }, async () => {
        for (let i = 0; i < perWriter; i++) {
          const at = performance.now();
          await gql(APPEND, { input: { runId, type: 'step', payload: { n: 1 }, fencingToken } });
          times.push(performance.now() - at);
        }
      }),
    );
    return { perSecond: (writers * perWriter) / ((performance.now() - started) / 1000), times };
  };
  await round(plain);
  await round(fenced, token);
  const plainRounds: Awaited<ReturnType<typeof round>>[] = [];
  const fencedRounds: Awaited<ReturnType<typeof round>>[] = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2) {
      plainRounds.push(await round(plain));
      fencedRounds.push(await round(fenced, token));
    } else {
      fencedRounds.push(await round(fenced, token));
      plainRounds.push(await round(plain));
    }
  }
  const rate = (list: typeof plainRounds) =>
    percentile(
      list.map((r) => r.perSecond),
      50,
    );
  const p50 = (list: typeof plainRounds) =>
    percentile(
      list.flatMap((r) => r.times),
      50,
    );
  return {
    writers,
    plain: { perSecond: rate(plainRounds), p50: p50(plainRounds) },
    fenced: { perSecond: rate(fencedRounds), p50: p50(fencedRounds) },
    ratio: p50(fencedRounds) / p50(plainRounds),
  };
}

/** From cancelRun sent (to `opsUrl`) until the worker's withRun signal (on `workerUrl`) aborts. */
async function cancelToSignal(workerUrl: string, opsUrl: string, samples: number) {
  const worker = createRunplane({ url: workerUrl, webSocketImpl: WebSocket });
  const ops = createRunplane({ url: opsUrl, webSocketImpl: WebSocket });
  const delays: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const runId = id('cancel');
      await ops.createRun({ id: runId, task: 'bench', budgetCap: 1 });
      let sentAt = 0;
      await worker
        .withRun({ runId, holder: 'bench', ttlSeconds: 60 }, async (run, signal) => {
          // The worker is following its run (its first write through, its runChanged live) before the cancel.
          await run.append({ type: 'step' });
          for (let tries = 0; tries < 100 && !(await ops.run(runId, { first: 0 }))?.claim; tries++)
            await new Promise((r) => setTimeout(r, 10));
          await new Promise((r) => setTimeout(r, 100));
          const aborted = new Promise<number>((resolve) =>
            signal.addEventListener('abort', () => resolve(performance.now()), { once: true }),
          );
          sentAt = performance.now();
          await ops.cancelRun({ runId, reason: 'bench' });
          delays.push((await aborted) - sentAt);
        })
        .catch(() => undefined);
    }
  } finally {
    await worker.close();
    await ops.close();
  }
  return stats(delays);
}

/** Claims of `ttlSeconds` left to run out: how long after each ran out its run was seen STALLED. */
async function stallDelay(url: string, samples: number, ttlSeconds: number) {
  const client = createRunplane({ url, webSocketImpl: WebSocket });
  const delays: number[] = [];
  try {
    const runs = await Promise.all(
      Array.from({ length: samples }, async () => {
        const runId = id('stall');
        await client.createRun({ id: runId, task: 'bench', budgetCap: 1 });
        return runId;
      }),
    );
    for (const runId of runs) {
      // Spread over the watcher's cycle: each claim runs out at another point of it.
      await new Promise((r) => setTimeout(r, Math.random() * 300));
      const claimed = await client.claimRun({ runId, holder: 'doomed', ttlSeconds });
      if (claimed.__typename !== 'RunClaim') throw new Error(`claim refused: ${claimed.__typename}`);
      const endsAt = Date.parse(claimed.expiresAt);
      void (async () => {
        for await (const state of client.runChanged(runId, { signal: AbortSignal.timeout(60_000) })) {
          if (state.status === 'STALLED') {
            delays.push(Date.now() - endsAt);
            return;
          }
        }
      })().catch(() => undefined);
    }
    const deadline = Date.now() + 60_000;
    while (delays.length < samples && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  } finally {
    await client.close();
  }
  return stats(delays);
}

export interface ClaimsResult {
  fencedAppend: Awaited<ReturnType<typeof fencedAppends>>;
  /** The same with the engine's data on disk (`npm start`'s default: transaction tokens kept in LevelDB). */
  fencedAppendOnDisk: Awaited<ReturnType<typeof fencedAppends>>;
  fencedAppendConcurrent: Awaited<ReturnType<typeof concurrentFencedAppends>>;
  cancelSameReplica: ReturnType<typeof stats>;
  cancelAcrossReplicas: ReturnType<typeof stats>;
  stall: ReturnType<typeof stats> & { checkSeconds: number; ttlSeconds: number };
}

/** The `claims` section's rows and figures. */
export async function claimsSection(step: (what: string) => void) {
  const checkSeconds = 1;
  const ttlSeconds = 1;
  step('claims: a fenced append against an unfenced one; cancel to the worker`s signal; stall detection');
  const server = await startServerProcess({ RUNPLANE_STALL_CHECK_SECONDS: String(checkSeconds) });
  let fencedAppend: ClaimsResult['fencedAppend'];
  let fencedAppendConcurrent: ClaimsResult['fencedAppendConcurrent'];
  let cancelSameReplica: ClaimsResult['cancelSameReplica'];
  let stall: ReturnType<typeof stats>;
  try {
    fencedAppend = await fencedAppends(server.url, 600);
    fencedAppendConcurrent = await concurrentFencedAppends(server.url, 6);
    cancelSameReplica = await cancelToSignal(server.url, server.url, 40);
    stall = await stallDelay(server.url, 30, ttlSeconds);
  } finally {
    await server.stop();
  }
  step('claims: a fenced append against an unfenced one, the engine on disk');
  const dataDir = mkdtempSync(join(tmpdir(), 'runplane-bench-claims-'));
  const onDisk = await startServerProcess({ RUNPLANE_IN_MEMORY: 'false', RUNPLANE_DATA_DIR: dataDir });
  let fencedAppendOnDisk: ClaimsResult['fencedAppendOnDisk'];
  try {
    fencedAppendOnDisk = await fencedAppends(onDisk.url, 600);
  } finally {
    await onDisk.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
  step('claims: cancel across two replicas through Redis');
  const enginePort = await freePort();
  const engine: StartedProcess = await startProcess(
    'packages/engine/src/cli.ts',
    {},
    [/Streams on http/],
    ['--port', String(enginePort), '--in-memory'],
    { quiet: true },
  );
  const redis = await startRedisProcess(await freePort());
  const replicas: StartedProcess[] = [];
  let cancelAcrossReplicas: ClaimsResult['cancelAcrossReplicas'];
  try {
    const urls: string[] = [];
    for (const name of ['a', 'b']) {
      const up = /Runplane is up: (\S+)/;
      const replica = await startProcess(
        'src/main.ts',
        {
          PORT: '0',
          AWS_ENDPOINT_URL_DYNAMODB: `http://127.0.0.1:${enginePort}`,
          RUNPLANE_TABLE: 'bench-claims',
          RUNPLANE_GRAPHIQL: 'false',
          RUNPLANE_REDIS_URL: redis.url,
          RUNPLANE_REDIS_SECRET: 'replicas-of-the-benchmark-share-this-secret',
          RUNPLANE_REPLICA_ID: name,
        },
        [up],
      );
      replicas.push(replica);
      urls.push(up.exec(replica.output())?.[1] as string);
    }
    cancelAcrossReplicas = await cancelToSignal(urls[0] as string, urls[1] as string, 40);
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
    await redis.kill();
    await engine.stop();
  }
  const result: ClaimsResult = {
    fencedAppend,
    fencedAppendOnDisk,
    fencedAppendConcurrent,
    cancelSameReplica,
    cancelAcrossReplicas,
    stall: { ...stall, checkSeconds, ttlSeconds },
  };
  const ms = (v: number) => `${v.toFixed(1)} ms`;
  const rows: [string, string, string, string][] = [
    [
      'appendEvent fenced by a claim`s token (p50 / p99)',
      `${ms(fencedAppend.fenced.p50)} / ${ms(fencedAppend.fenced.p99)}`,
      `unfenced, same run shape: ${ms(fencedAppend.plain.p50)} / ${ms(fencedAppend.plain.p99)}`,
      `${fencedAppend.ratio.toFixed(2)}x (p50; target <= 1.10x)`,
    ],
    [
      'appendEvent fenced, the engine on disk (p50 / p99)',
      `${ms(fencedAppendOnDisk.fenced.p50)} / ${ms(fencedAppendOnDisk.fenced.p99)}`,
      `unfenced, same run shape: ${ms(fencedAppendOnDisk.plain.p50)} / ${ms(fencedAppendOnDisk.plain.p99)}`,
      `${fencedAppendOnDisk.ratio.toFixed(2)}x (p50)`,
    ],
    [
      `appendEvent fenced, ${fencedAppendConcurrent.writers} writers at once on the run (group commit; p50, appends/s)`,
      `${ms(fencedAppendConcurrent.fenced.p50)}, ${Math.round(fencedAppendConcurrent.fenced.perSecond)}/s`,
      `unfenced: ${ms(fencedAppendConcurrent.plain.p50)}, ${Math.round(fencedAppendConcurrent.plain.perSecond)}/s`,
      `${fencedAppendConcurrent.ratio.toFixed(2)}x (p50)`,
    ],
    [
      'cancelRun -> the holder`s withRun signal, same replica (p50 / p99)',
      `${ms(cancelSameReplica.p50)} / ${ms(cancelSameReplica.p99)}`,
      'across two replicas, below',
      '',
    ],
    [
      'cancelRun on replica B -> the holder`s signal on A, through Redis (p50 / p99)',
      `${ms(cancelAcrossReplicas.p50)} / ${ms(cancelAcrossReplicas.p99)}`,
      `same replica: ${ms(cancelSameReplica.p50)} / ${ms(cancelSameReplica.p99)}`,
      `${(cancelAcrossReplicas.p99 / cancelSameReplica.p99).toFixed(2)}x (p99)`,
    ],
    [
      `a claim run out -> its run STALLED (p50 / p99; ${stall.samples} runs, TTL ${ttlSeconds} s)`,
      `${ms(stall.p50)} / ${ms(stall.p99)} after the claim's end`,
      `bound: one watcher interval (RUNPLANE_STALL_CHECK_SECONDS=${checkSeconds}): ${checkSeconds * 1000} ms`,
      `${(stall.p99 / (checkSeconds * 1000)).toFixed(2)}x of the bound (p99)`,
    ],
  ];
  return { rows, result };
}
