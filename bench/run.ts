/**
 * `npm run bench`: starts the servers (each with its embedded engine, in memory) in
 * processes of their own, drives them from this process, prints a table and writes
 * bench/results/latest.json. Every figure stands beside a baseline measured in the same run:
 * this machine is shared and noisy, so ratios mean more than absolute numbers.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { type ServerProcess, startServerProcess } from '../harness/processes.ts';
import { ms, percentile, ratio } from '../harness/stats.ts';
import { endurance } from '../packages/engine/bench/endurance.ts';
import { enduranceRows } from '../packages/engine/bench/endurance-rows.ts';
import { engineCost } from '../packages/engine/bench/engine-cost.ts';
import { catchUp } from './catch-up.ts';
import { claimsSection } from './claims.ts';
import { clientCost } from './client.ts';
import { consoleRows, consoleTimes } from './console.ts';
import { contendedAppends } from './contention.ts';
import { fanOutSection } from './fan-out-section.ts';
import { hostileSection } from './hostile-section.ts';
import { singleRequestLatency } from './latency.ts';
import { leaseContention } from './leases.ts';
import { outputSection } from './output.ts';
import { partitionsSection } from './partitions.ts';
import { replicasSection } from './replicas.ts';
import { slowReaders } from './slow-readers.ts';
import { subscriptionLatency } from './subscription-latency.ts';
import { targetsOf, targetsTable } from './targets.ts';

/** The stream poller's pace (src/streams/poller.ts defaults). */
const POLL_MIN_MS = 200;
const POLL_IDLE_MS = 300;
const CONTENTION_MS = 3000;

type Row = [benchmark: string, result: string, baseline: string, ratio: string];

const perSecond = (n: number) => `${Math.round(n)}/s`;
const signed = (n: number) => `${n < 0 ? '' : '+'}${n.toFixed(2)}`;
const step = (what: string) => {
  process.stderr.write(`bench: ${what}\n`);
};

async function withServer<T>(env: Record<string, string>, run: (server: ServerProcess) => Promise<T>) {
  const server = await startServerProcess(env);
  try {
    return await run(server);
  } finally {
    await server.stop();
  }
}

/**
 * `npm run bench -- <section> ... [writes]` runs only those sections (with none, all of them)
 * and writes bench/results/<sections>.json; a number is the endurance section's write count.
 */
const sections = [
  'requests',
  'client',
  'console',
  'contention',
  'fan-out',
  'slow-readers',
  'replicas',
  'claims',
  'output',
  'partitions',
  'hostile',
  'engine',
  'endurance',
] as const;
const args = process.argv.slice(2);
const asked = args.filter((arg) => !/^\d+$/.test(arg));
for (const name of asked) {
  if (!(sections as readonly string[]).includes(name)) throw new Error(`no benchmark section ${name}: ${sections.join(', ')}`);
}
const wanted = (name: (typeof sections)[number]) => asked.length === 0 || asked.includes(name);
const writes = Number(args.find((arg) => /^\d+$/.test(arg)) ?? 1_000_000);
if (writes < 100_000) throw new Error(`the endurance write count must be at least 100000 (got ${writes})`);
const resultsFile = asked.length === 0 ? 'latest.json' : `${asked.join('+')}.json`;

async function main() {
  // The SDK's note that releases after January 2027 need Node 22: known, and not for this table.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const began = performance.now();
  const rows: Row[] = [];
  const results: Record<string, unknown> = {
    startedAt: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
  };

  if (wanted('requests'))
    await withServer({}, async (server) => {
      step('single requests: appendEvent vs PutItem, run(id) vs Query');
      const single = await singleRequestLatency(server);
      results.singleRequest = single;
      rows.push([
        'appendEvent over HTTP (p50 / p99)',
        `${ms(single.append.api.p50)} / ${ms(single.append.api.p99)}`,
        `SDK conditional PutItem: ${ms(single.append.raw.p50)} / ${ms(single.append.raw.p99)}`,
        `${ratio(single.append.ratio)} (p50)`,
      ]);
      rows.push([
        'run(id) with 100 events (p50 / p99)',
        `${ms(single.read.api.p50)} / ${ms(single.read.api.p99)}`,
        `SDK Query: ${ms(single.read.raw.p50)} / ${ms(single.read.raw.p99)}`,
        `${ratio(single.read.ratio)} (p50)`,
      ]);

      step('subscription latency: API path and direct-write path');
      const latency = await subscriptionLatency(server);
      results.subscriptionLatency = { ...latency, pollMinIntervalMs: POLL_MIN_MS, pollIdleIntervalMs: POLL_IDLE_MS };
      rows.push([
        'write -> subscriber, through the API (p50 / p99)',
        `${ms(latency.apiP50)} / ${ms(latency.apiP99)}`,
        'the stream path below',
        `${ratio(latency.apiP99 / latency.directP99)} (p99)`,
      ]);
      rows.push([
        'write -> subscriber, straight into the table (p50 / p99)',
        `${ms(latency.directP50)} / ${ms(latency.directP99)}`,
        `poll every ${POLL_MIN_MS}-${POLL_IDLE_MS} ms`,
        `${ratio(latency.directP99 / POLL_IDLE_MS)} the idle interval (p99)`,
      ]);

      step('leases: 32 workers, 8 units');
      const leases = await leaseContention(server, 32, 8, CONTENTION_MS);
      results.leases = leases;
      rows.push([
        'leases, 32 workers on 8 units: acquisitions (refusals)',
        `${perSecond(leases.api.acquisitionsPerSecond)} (${perSecond(leases.api.refusalsPerSecond)})`,
        `SDK put-if-free + delete: ${perSecond(leases.raw.acquisitionsPerSecond)} (${perSecond(leases.raw.refusalsPerSecond)})`,
        ratio(leases.api.acquisitionsPerSecond / leases.raw.acquisitionsPerSecond),
      ]);

      step('catch-up: afterSeq 0 on a run of 10,000 events');
      const caught = await catchUp(server, 10_000);
      results.catchUp = caught;
      rows.push([
        'catch-up: afterSeq 0 on 10,000 events, time to live (median of 5, warm)',
        `${caught.liveSeconds.toFixed(2)} s${caught.liveAfter ? '' : ' (the next event did NOT arrive)'}`,
        `SDK paginated Query of them: ${caught.rawQuerySeconds.toFixed(2)} s`,
        ratio(caught.liveSeconds / caught.rawQuerySeconds),
      ]);
      const g = caught.growth;
      rows.push([
        'appendEvent on a run of 10,000 events (p50)',
        ms(g.appendLong),
        `on a run of 100: ${ms(g.appendShort)}`,
        ratio(g.appendLong / g.appendShort),
      ]);
      rows.push([
        'run(id), first 100 events, of 10,000 (p50)',
        ms(g.readLong),
        `of a run of 100: ${ms(g.readShort)}`,
        ratio(g.readLong / g.readShort),
      ]);
    });

  if (wanted('client')) await clientSection(rows, results);
  if (wanted('console')) await consoleSection(rows, results);
  if (wanted('contention')) await contendedSection(rows, results);
  if (wanted('fan-out')) {
    const fan = await fanOutSection(step);
    rows.push(...fan.rows);
    results.fanOut = fan.results;
  }
  if (wanted('slow-readers')) await slowReadersSection(rows, results);
  if (wanted('replicas')) {
    const replicas = await replicasSection(step);
    rows.push(...replicas.rows);
    results.replicas = replicas.result;
  }
  if (wanted('output'))
    await withServer({}, async (server) => {
      step('live output: 200 tokens/s to 100 subscribers, against appendEvent per token; catch-up of 1 MB');
      const output = await outputSection(server);
      rows.push(...output.rows);
      results.output = output.result;
    });

  if (wanted('claims')) {
    const claims = await claimsSection(step);
    rows.push(...claims.rows);
    results.claims = claims.result;
  }
  if (wanted('partitions')) {
    const partitions = await partitionsSection(step);
    rows.push(...partitions.rows);
    results.partitions = partitions.result;
  }
  if (wanted('hostile')) {
    const hostile = await hostileSection(step);
    rows.push(...hostile.rows);
    results.hostile = hostile.result;
  }
  if (wanted('engine')) await engineSection(rows, results);
  if (wanted('endurance')) {
    step(`engine endurance: ${writes.toLocaleString('en-US')} writes (the longest part)`);
    results.endurance = await endurance(writes, step);
    rows.push(...enduranceRows(results.endurance as Awaited<ReturnType<typeof endurance>>));
  }

  results.seconds = (performance.now() - began) / 1000;
  const targets = targetsOf(results);
  results.targets = targets;
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0), 8));
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | ')} |`;
  console.log(line(['benchmark', 'result', 'baseline (same run)', 'ratio']));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
  if (targets.length) console.log(`\nAgainst the third round's targets (this run):\n\n${targetsTable(targets)}`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(`bench/results/${resultsFile}`, `${JSON.stringify(results, null, 2)}\n`);
  console.log(
    `\n${cpus().length} CPUs, Node ${process.version}, ${(results.seconds as number).toFixed(0)} s; written to bench/results/${resultsFile}`,
  );
}

type Results = Record<string, unknown>;

async function clientSection(rows: Row[], results: Results) {
  step('client: appendEvent through runplane/client vs the raw request; runEvents catch-up vs a bare subscriber');
  const cost = await withServer({}, (server) => clientCost(server));
  results.client = cost;
  const { append, catchUp: caught } = cost;
  rows.push([
    'appendEvent through runplane/client (p50 / p99)',
    `${ms(append.client.p50)} / ${ms(append.client.p99)}`,
    `the same request by fetch, same key: ${ms(append.raw.p50)} / ${ms(append.raw.p99)}`,
    `${ratio(append.client.p50 / append.raw.p50)} (p50; target < 1.10x)`,
  ]);
  rows.push([
    'appendEvent with an idempotency key, by fetch (p50 / p99)',
    `${ms(append.raw.p50)} / ${ms(append.raw.p99)}`,
    `without a key: ${ms(append.rawWithoutKey.p50)} / ${ms(append.rawWithoutKey.p99)}`,
    `${ratio(append.raw.p50 / append.rawWithoutKey.p50)} (p50; the server's cost of the key)`,
  ]);
  const median = (xs: number[]) => percentile(xs, 50);
  for (const [name, through, bare] of [
    ['WebSocket', caught.clientWs, caught.bareWs],
    ['SSE', caught.clientSse, caught.bareSse],
  ] as const) {
    rows.push([
      `runEvents catch-up of ${caught.events.toLocaleString('en')} events through the client, ${name} (median of 5)`,
      `${median(through).toFixed(2)} s`,
      `the server's own, to a bare ${name} reader: ${median(bare).toFixed(2)} s`,
      ratio(median(through) / median(bare)),
    ]);
  }
}

async function consoleSection(rows: Row[], results: Results) {
  step('console: first paint and time to live on a run of 10,000 events, in headless Chromium, beside GraphiQL');
  const events = Number(process.env.BENCH_CONSOLE_EVENTS ?? 10_000);
  const times = await withServer({ RUNPLANE_GRAPHIQL: 'true' }, (server) => consoleTimes(server, events));
  results.console = times;
  rows.push(...consoleRows(times));
}

async function contendedSection(rows: Row[], results: Results) {
  step('contended appends, group commit on and off');
  const shapes: Array<[clients: number, runs: number]> = [
    [1, 1],
    [8, 1],
    [32, 1],
    [64, 1],
    [64, 64],
  ];
  const contention: Record<string, unknown>[] = [];
  const on = await startServerProcess({});
  const off = await startServerProcess({ RUNPLANE_GROUP_COMMIT: 'false' });
  try {
    // Unmeasured: the first shape measured two cold servers (the lone writer's guard read 0.84x
    // in such runs, 0.94x-1.15x warm).
    await contendedAppends([on, off], 8, 1, 2000);
    for (const [clients, runs] of shapes) {
      const [grouped, alone] = await contendedAppends([on, off], clients, runs, CONTENTION_MS);
      contention.push({ groupCommit: grouped, withoutGroupCommit: alone });
      const where = runs === 1 ? 'one run' : `${runs} runs`;
      rows.push([
        `appends, ${clients} client${clients > 1 ? 's' : ''} on ${where}: rate, conflicts/success, p50/p99`,
        `${perSecond(grouped.appendsPerSecond)}, ${grouped.conflictsPerSuccess.toFixed(2)}, ${ms(grouped.p50)}/${ms(grouped.p99)}`,
        `group commit off: ${perSecond(alone.appendsPerSecond)}, ${alone.conflictsPerSuccess.toFixed(2)}, ${ms(alone.p50)}/${ms(alone.p99)}`,
        ratio(grouped.appendsPerSecond / alone.appendsPerSecond),
      ]);
    }
  } finally {
    await Promise.all([on.stop(), off.stop()]);
  }
  results.contention = contention;
}

async function slowReadersSection(rows: Row[], results: Results) {
  // The load named for this benchmark (1,000 subscribers, 50 events/s of 16 KB: 800 MB/s to
  // write) is more than a 2-core machine moves with its load generator beside it; the second
  // load is one it carries. Each is measured with every subscriber reading, then with 100 stalled.
  const loads = [
    { eventsPerSecond: 50, seconds: 5 },
    { eventsPerSecond: 3, seconds: 10 },
  ];
  const measured: Record<string, unknown>[] = [];
  for (const { eventsPerSecond, seconds } of loads) {
    step(`slow readers: 1,000 subscribers, ${eventsPerSecond} events/s of 16 KB, none then 100 stalled`);
    const load = { subscribers: 1000, eventsPerSecond, payloadBytes: 16 * 1024, seconds };
    // Pings far apart: the stall (as long as the readers' lag, seconds at 50/s) is measured as a stall, not cut by the keepalive.
    const env = { RUNPLANE_WS_PING_SECONDS: '600' };
    const all = await withServer(env, (server) => slowReaders(server, { ...load, stalled: 0 }));
    const some = await withServer(env, (server) => slowReaders(server, { ...load, stalled: 100 }));
    measured.push({ allReading: all, hundredStalled: some });
    const growth = (r: typeof all) => r.rssPeakMiB - r.rssIdleMiB;
    rows.push([
      `slow readers, 1,000 x ${eventsPerSecond} events/s of 16 KB, 100 stalled: readers' p99`,
      `${ms(some.p99)} (p50 ${ms(some.p50)})${some.stalledCaughtUp === true ? '' : `; the stalled did NOT all catch up (${some.stalledCaughtUp})`}`,
      `all reading: ${ms(all.p99)} (p50 ${ms(all.p50)})`,
      `${ratio(some.p99 / all.p99)} (target < 1.10x)`,
    ]);
    rows.push([
      `slow readers, 1,000 x ${eventsPerSecond} events/s of 16 KB: server RSS growth`,
      `${growth(some).toFixed(0)} MiB with 100 stalled`,
      `all reading: ${growth(all).toFixed(0)} MiB`,
      `${signed((growth(some) - growth(all)) / 100)} MiB per stalled reader`,
    ]);
  }
  results.slowReaders = measured;
}

async function engineSection(rows: Row[], results: Results) {
  step('engine cost: embedded engine vs plain dynalite');
  const engine = await engineCost(2000);
  results.engineCost = engine;
  for (const row of engine.rows) {
    rows.push([
      `engine: ${row.operation}, 8 concurrent`,
      perSecond(row.engineOpsPerSecond),
      `plain dynalite: ${perSecond(row.dynaliteOpsPerSecond)}`,
      ratio(row.ratio),
    ]);
  }
  rows.push(['engine: TransactWriteItems (2 puts), 8 concurrent', perSecond(engine.transactOpsPerSecond), 'dynalite has none', '']);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
