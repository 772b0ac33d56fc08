/**
 * `npm run bench`: starts the servers (each with its embedded engine, in memory) in
 * processes of their own, drives them from this process, prints a table and writes
 * bench/results/latest.json. Every figure stands beside a baseline measured in the same run:
 * this machine is shared and noisy, so ratios mean more than absolute numbers.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { catchUp } from './catch-up.ts';
import { contendedAppends } from './contention.ts';
import { type EnduranceResult, endurance } from './endurance.ts';
import { engineCost } from './engine-cost.ts';
import { fanOut } from './fan-out.ts';
import { singleRequestLatency } from './latency.ts';
import { leaseContention } from './leases.ts';
import { type ServerProcess, startServerProcess } from './server.ts';
import { ms, ratio } from './stats.ts';
import { subscriptionLatency } from './subscription-latency.ts';
import { wsFloor } from './ws-floor.ts';

/** The stream poller's pace (src/streams/poller.ts defaults). */
const POLL_MIN_MS = 200;
const POLL_IDLE_MS = 300;
const CONTENTION_MS = 3000;

type Row = [benchmark: string, result: string, baseline: string, ratio: string];

const perSecond = (n: number) => `${Math.round(n)}/s`;
const step = (what: string) => process.stderr.write(`bench: ${what}\n`);

async function withServer<T>(env: Record<string, string>, run: (server: ServerProcess) => Promise<T>) {
  const server = await startServerProcess(env);
  try {
    return await run(server);
  } finally {
    await server.stop();
  }
}

function enduranceRows(result: EnduranceResult): Row[] {
  const writes = result.writes.toLocaleString('en-US');
  return [
    [
      `engine endurance: RSS after ${writes} writes (1 KB items, NEW_AND_OLD_IMAGES stream)`,
      `${result.rssEndMiB.toFixed(0)} MiB (uncollected ${result.rssEndUncollectedMiB.toFixed(0)}, peak ${result.rssPeakMiB.toFixed(0)})`,
      `after 10,000: ${result.rssBaselineMiB.toFixed(0)} MiB (uncollected ${result.rssBaselineUncollectedMiB.toFixed(0)}; target < 1.2x)`,
      ratio(result.rssRatio),
    ],
    [
      'engine endurance: write rate, last 10% of the writes',
      perSecond(result.lastTenthPerSecond),
      `first 10%: ${perSecond(result.firstTenthPerSecond)} (target > 0.8x)`,
      ratio(result.throughputRatio),
    ],
    [
      'engine endurance: engine CPU per write, last 10% of the writes',
      `${result.lastTenthCpuMsPerWrite.toFixed(2)} ms`,
      `first 10%: ${result.firstTenthCpuMsPerWrite.toFixed(2)} ms (machine load ${result.loadAverage.firstTenth.map((l) => l.toFixed(1)).join('-')} / ${result.loadAverage.lastTenth.map((l) => l.toFixed(1)).join('-')})`,
      ratio(result.cpuRatio),
    ],
    [
      `engine endurance: restart to first answer (first stream record) on that data, ${result.dataDirMiB.toFixed(0)} MiB`,
      `${ms(result.restart.dataMs)} (${ms(result.restart.dataFirstRecordMs)})`,
      `on a fresh folder: ${ms(result.restart.emptyMs)} (${ms(result.restart.emptyFirstRecordMs)})`,
      ratio(result.restart.ratio),
    ],
  ];
}

function printTable(rows: Row[]) {
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0), 8));
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | ')} |`;
  console.log(line(['benchmark', 'result', 'baseline (same run)', 'ratio']));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

function writeResults(file: string, results: Record<string, unknown>) {
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(`bench/results/${file}`, `${JSON.stringify(results, null, 2)}\n`);
  console.log(
    `\n${cpus().length} CPUs, Node ${process.version}, ${(results.seconds as number).toFixed(0)} s; written to bench/results/${file}`,
  );
}

const machine = () => ({
  startedAt: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
});

/** `npm run bench -- endurance [writes]`: the endurance rows alone. */
async function enduranceOnly(writes: number) {
  const began = performance.now();
  step(`endurance: ${writes.toLocaleString('en-US')} writes`);
  const result = await endurance(writes, step);
  printTable(enduranceRows(result));
  writeResults('endurance.json', { ...machine(), endurance: result, seconds: (performance.now() - began) / 1000 });
}

async function main() {
  // The SDK's note that releases after January 2027 need Node 22: known, and not for this table.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // `npm run bench`, `npm run bench -- all [writes]` or `npm run bench -- endurance [writes]`.
  const [only = 'all', count] = process.argv.slice(2);
  const writes = count === undefined ? 1_000_000 : Number(count);
  if (!Number.isSafeInteger(writes) || writes < 100_000) throw new Error(`writes must be a whole number of at least 100000 (got ${count})`);
  if (only === 'endurance') return enduranceOnly(writes);
  if (only !== 'all') throw new Error(`unknown benchmark ${only}: 'all' (the default) or 'endurance'`);
  const began = performance.now();
  const rows: Row[] = [];
  const results: Record<string, unknown> = machine();

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
      'catch-up: afterSeq 0 on 10,000 events, time to live',
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
    for (const [clients, runs] of shapes) {
      // Alternating servers: both meet the same load on this shared machine.
      const grouped = await contendedAppends(on, clients, runs, CONTENTION_MS);
      const alone = await contendedAppends(off, clients, runs, CONTENTION_MS);
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

  step('fan-out: 1,000 WebSocket subscribers, 50 events/s');
  const fan = await withServer({}, (server) => fanOut(server, 1000, 50, 10));
  const floor = await wsFloor(1000, 50, 10);
  results.fanOut = { ...fan, bareWs: floor };
  rows.push([
    'fan-out, 1,000 subscribers x 50 events/s: delivery p50 / p99',
    `${ms(fan.p50)} / ${ms(fan.p99)}; ${fan.delivered}/${fan.expected} delivered${fan.incomplete ? `, ${fan.incomplete} subscribers incomplete` : ''}`,
    `bare ws broadcast: ${ms(floor.p50)} / ${ms(floor.p99)} (target p99 < 250 ms)`,
    `${ratio(fan.p99 / 250)} of target`,
  ]);
  rows.push([
    'fan-out: server CPU while events flow',
    `${fan.serverCores.toFixed(2)} cores`,
    `bare ws broadcast: ${floor.serverCores.toFixed(2)} cores`,
    ratio(fan.serverCores / floor.serverCores),
  ]);
  rows.push([
    'fan-out: server RSS',
    `${fan.rssPeakMiB.toFixed(0)} MiB with 1,000 subscribers`,
    `idle: ${fan.rssIdleMiB.toFixed(0)} MiB`,
    `+${((fan.rssPeakMiB - fan.rssIdleMiB) / 1000).toFixed(3)} MiB/subscriber`,
  ]);

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

  step(`engine endurance: ${writes.toLocaleString('en-US')} writes (the longest part)`);
  results.endurance = await endurance(writes, step);
  rows.push(...enduranceRows(results.endurance as EnduranceResult));

  results.seconds = (performance.now() - began) / 1000;
  printTable(rows);
  writeResults('latest.json', results);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
