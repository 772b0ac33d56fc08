/**
 * `npm run bench`: starts the server (with its embedded engine) in a process of its own,
 * runs each benchmark from this process, prints a table and writes bench/results/latest.json.
 * Figures are reported beside a baseline measured in the same run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { startServerProcess } from './server.ts';
import { ms, ratio } from './stats.ts';
import { subscriptionLatency } from './subscription-latency.ts';

/** The stream poller's pace (src/streams/poller.ts defaults). */
const POLL_MIN_MS = 200;
const POLL_IDLE_MS = 300;

async function main() {
  // The SDK's note that releases after January 2027 need Node 22: known, and not for this table.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const server = await startServerProcess();
  const rows: [string, string, string, string][] = [];
  const results: Record<string, unknown> = { startedAt: new Date().toISOString(), node: process.version };
  try {
    const latency = await subscriptionLatency(server);
    results.subscriptionLatency = { ...latency, pollMinIntervalMs: POLL_MIN_MS, pollIdleIntervalMs: POLL_IDLE_MS };
    rows.push([
      'write -> subscriber, through the API (p50 / p99)',
      `${ms(latency.apiP50)} / ${ms(latency.apiP99)}`,
      'target p99 < 50 ms',
      '',
    ]);
    rows.push([
      'write -> subscriber, straight into the table (p50 / p99)',
      `${ms(latency.directP50)} / ${ms(latency.directP99)}`,
      `poll every ${POLL_MIN_MS}-${POLL_IDLE_MS} ms`,
      `p99 = ${ratio(latency.directP99 / POLL_IDLE_MS)} the idle poll interval`,
    ]);
  } finally {
    await server.stop();
  }
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0), 8));
  console.log(['benchmark', 'result', 'baseline', 'ratio'].map((h, i) => h.padEnd(widths[i] as number)).join(' | '));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const row of rows) console.log(row.map((cell, i) => cell.padEnd(widths[i] as number)).join(' | '));
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/latest.json', `${JSON.stringify(results, null, 2)}\n`);
  console.log('\nwritten to bench/results/latest.json');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
