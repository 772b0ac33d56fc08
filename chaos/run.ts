/**
 * `npm run chaos`: every fault scenario against a real engine and real servers, each for
 * a while under load, then the invariant checks. Prints the counts; exits 1 on any violation.
 *
 *   npm run chaos                         # every scenario, 20 s of load each
 *   npm run chaos -- --seconds 60 throttling engine-restart
 */
import { parseArgs } from 'node:util';
import { type Report, runScenario, scenarios } from './scenarios.ts';

async function main() {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const { values, positionals } = parseArgs({ options: { seconds: { type: 'string', default: '20' } }, allowPositionals: true });
  const seconds = Number(values.seconds);
  if (!(seconds > 0)) throw new Error(`--seconds must be a positive number (got ${values.seconds})`);
  const chosen = positionals.length ? scenarios.filter((s) => positionals.includes(s.name)) : scenarios;
  const unknown = positionals.filter((name) => !scenarios.some((s) => s.name === name));
  if (unknown.length) throw new Error(`no scenario ${unknown.join(', ')}; there are: ${scenarios.map((s) => s.name).join(', ')}`);
  const reports: Report[] = [];
  for (const scenario of chosen) {
    const report = await runScenario(scenario, seconds, (line) => console.error(`chaos: ${line}`));
    reports.push(report);
    for (const v of report.violations.slice(0, 20)) console.error(`  VIOLATION ${v}`);
    if (report.historyFile) console.error(`  history: ${report.historyFile}`);
    for (const u of [...new Set(report.unexpected)].slice(0, 5)) console.error(`  unexpected answer: ${u}`);
  }
  const header = [
    'scenario',
    'requests',
    'acknowledged writes',
    'refused',
    'unknown',
    'faults',
    'stalls',
    'crashes',
    'resumes',
    'cap refusals',
    'output chars',
    'output resumes',
    'violations',
    'seconds',
  ];
  const rows = reports.map((r) => [
    r.scenario,
    r.requests,
    r.acknowledgedWrites,
    r.refused,
    r.unknown,
    r.faults,
    r.stalls,
    r.crashes,
    r.subscriberResumes,
    r.budgetRefusals,
    r.outputLength,
    r.outputResumes,
    r.violations.length,
    r.seconds.toFixed(0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => String(row[i]).length)));
  const line = (cells: unknown[]) => cells.map((c, i) => String(c).padEnd(widths[i] as number)).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
  const violations = reports.reduce((n, r) => n + r.violations.length, 0);
  console.log(`\n${violations} invariant violations`);
  process.exit(violations > 0 ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
