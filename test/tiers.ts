/**
 * The test suite in tiers by cost, one vitest project each (vitest.config.ts):
 * - unit: in this process only: the embedded engine, real servers on loopback, real clients;
 * - long: in this process too, but the longest or heaviest of such files (load, fuzzing, bounds
 *   reached with real data, clients across restarts): most of the in-process tiers' cost;
 * - e2e: child processes (`npm start`, the engine's CLI, the CLIs), replicas and Redis;
 * - browser: Chromium driven by playwright-core;
 * - chaos: the fault harness's scenarios in short mode (engine and server processes under load).
 * A file belongs to the tier of the longest path below that it lies under. test/tiers.test.ts
 * fails for a test file under none, and for an in-process file that reaches what starts a
 * process, a browser or Redis.
 */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';

export const tiers = {
  unit: [
    'test/config.test.ts',
    'test/scripts/',
    'test/tiers.test.ts',
    'test/wait.test.ts',
    'test/chaos/checkers.test.ts',
    // Whole servers, but in this process.
    'test/e2e/engine-partition-limits.test.ts',
    'test/e2e/reconnect.test.ts',
    'test/e2e/throttled-appends.test.ts',
    'test/client/',
    'test/console/',
    'test/domain/',
    'test/engine/',
    'test/http/',
    'test/jobs/',
    'test/lib/',
    'test/schema/',
    'test/store/',
    'test/streams/',
    'test/table/',
  ],
  long: [
    'test/schema/fuzz.test.ts',
    'test/engine/load.test.ts',
    'test/http/document-cache.test.ts',
    'test/client/run-events.test.ts',
    'test/streams/poller.test.ts',
    'test/schema/group-commit.test.ts',
    'test/http/limits.test.ts',
    // Random documents against a run made to read as much as it can.
    'test/http/read-cost.test.ts',
    // Clients that read nothing, against megabytes of real answers.
    'test/http/unread-responses.test.ts',
    'test/http/unread-sockets.test.ts',
    'test/schema/run-state.test.ts',
    // Real time: claims and leases running out, gaps waited out.
    'test/client/streams.test.ts',
    'test/client/lease.test.ts',
    'test/schema/claims.test.ts',
    'test/schema/stall-fairness.test.ts',
    'test/schema/late-holes.test.ts',
  ],
  e2e: [
    'test/e2e/',
    'test/cli/',
    'test/engine/cli.test.ts',
    'test/engine/table-definitions.test.ts',
    'test/http/slow-clients.test.ts',
    'test/streams/redis-fanout.test.ts',
  ],
  browser: ['test/browser/'],
  chaos: ['test/chaos/'],
} as const satisfies Record<string, readonly string[]>;

export type Tier = keyof typeof tiers;

/**
 * The order a whole run starts the tiers' files in: the tier of the longest file first (chaos is
 * one file of two minutes), so the long ones run while the others fill the workers around them,
 * and the many short files of `unit` come last to even out the end.
 */
export const runOrder: readonly Tier[] = ['chaos', 'browser', 'e2e', 'long', 'unit'];

/** The tiers that start no process, browser or Redis. */
export const inProcessTiers: readonly Tier[] = ['unit', 'long'];

/** What `npm run test:quick` runs: the in-process tier that is quick. */
export const quickTiers: readonly Tier[] = ['unit'];

/** The tier a test file (a path from the repository's root) belongs to, or undefined. */
export function tierOf(file: string): Tier | undefined {
  let best: { tier: Tier; length: number } | undefined;
  for (const [tier, paths] of Object.entries(tiers) as [Tier, readonly string[]][])
    for (const path of paths)
      if ((path.endsWith('/') ? file.startsWith(path) : file === path) && path.length > (best?.length ?? -1))
        best = { tier, length: path.length };
  return best?.tier;
}

/** Every test file under test/, as a path from the repository's root. */
export function testFiles(root: string): string[] {
  return readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) =>
      relative(root, join(root, 'test', name))
        .split('\\')
        .join('/'),
    )
    .sort();
}

/** The test files of one tier, as vitest's `include` takes them. */
export const filesOf = (root: string, tier: Tier) => testFiles(root).filter((file) => tierOf(file) === tier);

/**
 * Whether the run is `npm test` (npm names the script it runs) and names no project (`npm test --
 * --project e2e` still picks a tier): then every tier is one vitest project. A worker keeps the
 * modules it imported only within a project: as a project each, every tier's workers would
 * import the server's modules again.
 */
export const isWholeRun = (env: Record<string, string | undefined>, argv: readonly string[] = []) =>
  env.npm_lifecycle_event === 'test' && !argv.some((arg) => arg === '--project' || arg.startsWith('--project='));

/** The vitest projects, by name with their files: one for a whole run, else one per tier. */
export function projectsOf(root: string, whole: boolean): { name: string; include: string[] }[] {
  const all = Object.keys(tiers) as Tier[];
  if (whole) return [{ name: 'all', include: all.flatMap((tier) => filesOf(root, tier)) }];
  return all.map((tier) => ({ name: tier, include: filesOf(root, tier) }));
}
