/**
 * Endurance: the embedded engine as a server that runs for weeks. One engine process
 * (`npm run engine -- --data <temp folder>`), a table with a NEW_AND_OLD_IMAGES stream, 16
 * SDK writers putting 1 KB items of random text (each a new item, as appends are). Reported as ratios
 * against baselines taken in the same run:
 *
 * - engine RSS after all the writes against RSS after the first 10,000 (target under 1.2x).
 *   At both points the writers pause, the engine collects its garbage (a full collection,
 *   asked over its IPC channel) and RSS is the median of 10 samples over 2 s: where the
 *   collector happened to be would otherwise move the figure by 20-30% on its own. The
 *   same without the collection and the peak during the run are reported too;
 * - write throughput over the last 10% of the writes against the first 10% (target above
 *   0.8x), pauses excluded; beside it the engine's CPU time per write in the same windows,
 *   which other processes on a shared machine move much less than they move throughput;
 * - restart to first answer on that data (spawn to a successful DescribeTable, and to the
 *   first record read from the start of the stream) against the same on a fresh folder, the
 *   median of three restarts each.
 *
 * Alone: `npm run bench -- endurance [writes]` (default 1,000,000; about 15 minutes here).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, DynamoDBStreamsClient, GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-dynamodb-streams';
import { type StartedProcess, startProcess } from '../../../harness/processes.ts';
import { percentile } from '../../../harness/stats.ts';

const TABLE = 'endurance';
const WRITERS = 16;
const BASELINE_WRITES = 10_000;
/** 1 KB bodies of random text, which LevelDB's compression cannot shrink (real payloads shrink a little). */
const BODIES = Array.from({ length: 256 }, () => randomBytes(750).toString('base64'));
const body = (n: number) => BODIES[n % BODIES.length] as string;
const credentials = { accessKeyId: 'bench', secretAccessKey: 'bench' };

export interface EnduranceResult {
  writes: number;
  rssBaselineMiB: number;
  rssEndMiB: number;
  rssRatio: number;
  /** The same two figures before the collection. */
  rssBaselineUncollectedMiB: number;
  rssEndUncollectedMiB: number;
  rssPeakMiB: number;
  firstTenthPerSecond: number;
  lastTenthPerSecond: number;
  throughputRatio: number;
  /** The engine's CPU per write in the same windows: its own cost, whatever else the machine runs. */
  firstTenthCpuMsPerWrite: number;
  lastTenthCpuMsPerWrite: number;
  cpuRatio: number;
  /** The machine's load average at the start and end of each window. */
  loadAverage: { firstTenth: number[]; lastTenth: number[] };
  restart: { dataMs: number; dataFirstRecordMs: number; emptyMs: number; emptyFirstRecordMs: number; ratio: number };
  dataDirMiB: number;
  seconds: number;
}

const clients = (endpoint: string) => ({
  dynamo: new DynamoDBClient({ endpoint, region: 'us-east-1', credentials, maxAttempts: 1 }),
  streams: new DynamoDBStreamsClient({ endpoint, region: 'us-east-1', credentials, maxAttempts: 1 }),
});

async function freePort() {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const startEngine = (dataDir: string, port: number) =>
  startProcess('packages/engine/src/cli.ts', {}, [/on (http:\S+)/], ['--port', String(port), '--data', dataDir], {
    quiet: true,
    ipc: true,
    nodeFlags: ['--expose-gc'],
  });

async function createTable(dynamo: DynamoDBClient) {
  await dynamo.send(
    new CreateTableCommand({
      TableName: TABLE,
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
      StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
    }),
  );
}

/** RSS once the writers paused (the median of 10 samples over 2 s), before and after a full collection. */
async function settledRss(engine: StartedProcess) {
  const median = async () => {
    const samples: number[] = [];
    for (let i = 0; i < 10; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      samples.push(engine.rssMiB());
    }
    return percentile(samples, 50);
  };
  const uncollected = await median();
  await engine.request({ op: 'collectGarbage' });
  return { uncollected, collected: await median() };
}

interface Mark {
  /** Seconds of writing so far, pauses excluded. */
  at: number;
  /** CPU seconds the engine process has used (all its threads, LevelDB's compactions included). */
  cpu: number;
  /** The machine's load average over the last minute (the other processes' share of the cores). */
  load: number;
}

/**
 * Writes `total` new 1 KB items with 16 writers; calls `at(n)` when n writes are done, with
 * the writers paused. Returns time and engine CPU at the start, at each mark and at the end.
 */
async function write(engine: StartedProcess, dynamo: DynamoDBClient, total: number, marks: number[], at: (n: number) => Promise<void>) {
  let started = 0;
  let done = 0;
  let pause: Promise<void> | undefined;
  let pausedMs = 0;
  const mark = (): Mark => ({ at: (performance.now() - pausedMs) / 1000, cpu: engine.cpuSeconds(), load: loadavg()[0] as number });
  const reached = new Map<number, Mark>([[0, mark()]]);
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      while (started < total) {
        if (pause) await pause;
        const n = started++;
        await dynamo.send(new PutItemCommand({ TableName: TABLE, Item: { pk: { S: `w${writer}-${n}` }, body: { S: body(n) } } }));
        done++;
        if (!marks.includes(done) || pause) continue;
        reached.set(done, mark());
        const pausedAt = performance.now();
        // The mark is reached: the other writers wait while it is measured.
        pause = at(done).finally(() => {
          pausedMs += performance.now() - pausedAt;
          pause = undefined;
        });
      }
    }),
  );
  reached.set(total, mark());
  return reached;
}

/** Spawn to the first successful DescribeTable, and to the first record read from the stream's oldest shard. */
async function restartOnce(dataDir: string) {
  const port = await freePort();
  const began = performance.now();
  const engine = await startEngine(dataDir, port);
  try {
    const { dynamo, streams } = clients(`http://127.0.0.1:${port}`);
    const { Table } = await dynamo.send(new DescribeTableCommand({ TableName: TABLE }));
    const answeredMs = performance.now() - began;
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
    const shard = StreamDescription?.Shards?.[0];
    const { ShardIterator } = await streams.send(
      new GetShardIteratorCommand({ StreamArn: Table?.LatestStreamArn, ShardId: shard?.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
    );
    const { Records } = await streams.send(new GetRecordsCommand({ ShardIterator, Limit: 1 }));
    if (!Records?.length) throw new Error('the stream had no record after the restart');
    return { answeredMs, firstRecordMs: performance.now() - began };
  } finally {
    await engine.stop();
  }
}

/** The median of three restarts (a process start moves by a hundred milliseconds on this machine). */
async function restart(dataDir: string) {
  const runs = [await restartOnce(dataDir), await restartOnce(dataDir), await restartOnce(dataDir)];
  const median = (pick: (run: (typeof runs)[number]) => number) => percentile(runs.map(pick), 50);
  return { answeredMs: median((r) => r.answeredMs), firstRecordMs: median((r) => r.firstRecordMs) };
}

const dirSizeMiB = (dir: string) => readdirSync(dir).reduce((sum, file) => sum + statSync(join(dir, file)).size, 0) / 2 ** 20;

export async function endurance(totalWrites = 1_000_000, log: (line: string) => void = () => undefined): Promise<EnduranceResult> {
  const began = performance.now();
  const dataDir = mkdtempSync(join(tmpdir(), 'runplane-endurance-'));
  const emptyDir = mkdtempSync(join(tmpdir(), 'runplane-endurance-empty-'));
  try {
    // The baseline restart: a fresh folder with the table and one record.
    const fresh = await startEngine(emptyDir, await freePort());
    try {
      const { dynamo } = clients(/on (http:\S+)/.exec(fresh.output())?.[1] as string);
      await createTable(dynamo);
      await dynamo.send(new PutItemCommand({ TableName: TABLE, Item: { pk: { S: 'one' }, body: { S: body(0) } } }));
      dynamo.destroy();
    } finally {
      await fresh.stop();
    }
    const empty = await restart(emptyDir);

    const engine = await startEngine(dataDir, await freePort());
    let baseline = { uncollected: 0, collected: 0 };
    let end = baseline;
    let rssPeakMiB = 0;
    const peak = setInterval(() => {
      rssPeakMiB = Math.max(rssPeakMiB, engine.rssMiB());
    }, 500);
    const tenth = Math.round(totalWrites / 10);
    let marks: Map<number, Mark>;
    try {
      const { dynamo } = clients(/on (http:\S+)/.exec(engine.output())?.[1] as string);
      await createTable(dynamo);
      marks = await write(engine, dynamo, totalWrites, [BASELINE_WRITES, tenth, totalWrites - tenth], async (n) => {
        log(`${n} writes, engine RSS ${engine.rssMiB().toFixed(0)} MiB`);
        if (n === BASELINE_WRITES) baseline = await settledRss(engine);
      });
      end = await settledRss(engine);
      log(`${totalWrites} writes, engine RSS ${end.uncollected.toFixed(0)} MiB, ${end.collected.toFixed(0)} MiB after a collection`);
      dynamo.destroy();
    } finally {
      clearInterval(peak);
      await engine.stop();
    }

    const window = (from: number, to: number) => {
      const [a, b] = [marks.get(from) as Mark, marks.get(to) as Mark];
      return { perSecond: tenth / (b.at - a.at), cpuMsPerWrite: ((b.cpu - a.cpu) * 1000) / tenth, load: [a.load, b.load] };
    };
    const first = window(0, tenth);
    const last = window(totalWrites - tenth, totalWrites);
    const loaded = await restart(dataDir);
    return {
      writes: totalWrites,
      rssBaselineMiB: baseline.collected,
      rssEndMiB: end.collected,
      rssRatio: end.collected / baseline.collected,
      rssBaselineUncollectedMiB: baseline.uncollected,
      rssEndUncollectedMiB: end.uncollected,
      rssPeakMiB,
      firstTenthPerSecond: first.perSecond,
      lastTenthPerSecond: last.perSecond,
      throughputRatio: last.perSecond / first.perSecond,
      firstTenthCpuMsPerWrite: first.cpuMsPerWrite,
      lastTenthCpuMsPerWrite: last.cpuMsPerWrite,
      cpuRatio: last.cpuMsPerWrite / first.cpuMsPerWrite,
      loadAverage: { firstTenth: first.load, lastTenth: last.load },
      restart: {
        dataMs: loaded.answeredMs,
        dataFirstRecordMs: loaded.firstRecordMs,
        emptyMs: empty.answeredMs,
        emptyFirstRecordMs: empty.firstRecordMs,
        ratio: loaded.answeredMs / empty.answeredMs,
      },
      dataDirMiB: dirSizeMiB(dataDir),
      seconds: (performance.now() - began) / 1000,
    };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(emptyDir, { recursive: true, force: true });
  }
}
