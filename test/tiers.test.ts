/**
 * Every test file is in a tier (or vitest would never run it), and the in-process tiers (the
 * quick one among them) start no process, browser or Redis: none of their files reaches,
 * through the test side's own modules, an import of what starts one.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { inProcessTiers, isWholeRun, projectsOf, quickTiers, runOrder, testFiles, tierOf, tiers } from './tiers.ts';

const root = resolve(import.meta.dirname, '..');

/** Packages whose import means starting a process, a browser, or a connection to Redis. */
const STARTERS = ['node:child_process', 'child_process', 'playwright-core', 'ioredis'];

const IMPORT = /(?:^|\s)(?:import|export)\s[^;]*?from\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm;

/** The imports of one file, as written. */
function importsOf(file: string): string[] {
  return [...readFileSync(join(root, file), 'utf8').matchAll(IMPORT)].map((m) => (m[1] ?? m[2] ?? m[3]) as string);
}

/**
 * The chain of files from `file` to an import of a starter, or undefined. It follows relative
 * imports through the test side (test/, bench/, chaos/, harness/, scripts/), not into src/: the product's code
 * imports ioredis to fan out when configured to, and starts nothing of itself.
 */
function starterChain(file: string, seen = new Set<string>()): string[] | undefined {
  if (seen.has(file)) return undefined;
  seen.add(file);
  for (const specifier of importsOf(file)) {
    if (STARTERS.includes(specifier)) return [file, specifier];
    if (!specifier.startsWith('.')) continue;
    const target = relative(root, resolve(root, dirname(file), specifier))
      .split('\\')
      .join('/');
    if (target.startsWith('src/') || !existsSync(join(root, target))) continue;
    const chain = starterChain(target, seen);
    if (chain) return [file, ...chain];
  }
  return undefined;
}

describe('test tiers', () => {
  const files = testFiles(root);

  test('the run order names every tier once', () => {
    expect([...runOrder].sort()).toEqual(Object.keys(tiers).sort());
  });

  test('every test file belongs to a tier', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((file) => tierOf(file) === undefined)).toEqual([]);
  });

  test('every path a tier names exists and holds a test file of that tier', () => {
    for (const [tier, paths] of Object.entries(tiers))
      for (const path of paths) {
        expect(existsSync(join(root, path)), path).toBe(true);
        expect(
          files.some((file) => (path.endsWith('/') ? file.startsWith(path) : file === path) && tierOf(file) === tier),
          path,
        ).toBe(true);
      }
  });

  test('no in-process file starts a process, a browser or Redis', () => {
    const inProcess = files.filter((file) => inProcessTiers.includes(tierOf(file) as never));
    expect(quickTiers.every((tier) => inProcessTiers.includes(tier))).toBe(true);
    expect(inProcess.length).toBeGreaterThan(50);
    const starting = inProcess.map((file) => starterChain(file)).filter((chain) => chain !== undefined);
    expect(starting.map((chain) => chain.join(' -> '))).toEqual([]);
  });

  test('npm run test:quick runs the quick tiers, npm test all of them', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(scripts.test).toBe('vitest run');
    expect(scripts['test:quick']).toBe(`vitest run ${quickTiers.map((tier) => `--project ${tier}`).join(' ')}`);
  });

  test('npm test is one project of every test file; vitest alone and npm run test:quick see the tiers', () => {
    expect(isWholeRun({ npm_lifecycle_event: 'test' })).toBe(true);
    expect(isWholeRun({ npm_lifecycle_event: 'test:quick' })).toBe(false);
    expect(isWholeRun({})).toBe(false);
    expect(isWholeRun({ npm_lifecycle_event: 'test' }, ['node', 'vitest', 'run', '--project', 'e2e'])).toBe(false);
    expect(isWholeRun({ npm_lifecycle_event: 'test' }, ['node', 'vitest', 'run', '--project=e2e'])).toBe(false);
    const whole = projectsOf(root, true);
    expect(whole.map((p) => p.name)).toEqual(['all']);
    expect([...(whole[0]?.include ?? [])].sort()).toEqual(files);
    const tiered = projectsOf(root, false);
    expect(tiered.map((p) => p.name)).toEqual(Object.keys(tiers));
    expect(tiered.flatMap((p) => p.include).sort()).toEqual(files);
  });

  test('no support module registers a hook when it is imported', () => {
    // A tier's files share their worker's modules (isolate: false): a hook registered at import
    // belongs to the first file that imported the module, and no later file in that worker has it.
    const hook = /^(?:before|after)(?:Each|All)\(/m;
    const support = readdirSync(join(root, 'test/support')).filter((name) => name.endsWith('.ts'));
    expect(support.length).toBeGreaterThan(10);
    expect(support.filter((name) => hook.test(readFileSync(join(root, 'test/support', name), 'utf8')))).toEqual([]);
  });

  test('the check sees a starter through the support modules', () => {
    expect(starterChain('test/http/slow-clients.test.ts')).toEqual([
      'test/http/slow-clients.test.ts',
      'test/support/main-process.ts',
      'node:child_process',
    ]);
    expect(starterChain('test/streams/redis-fanout.test.ts')?.at(-1)).toBe('ioredis');
    expect(starterChain('test/browser/graphiql.test.ts')?.at(-1)).toBe('playwright-core');
    // Every file of the other tiers starts something (else it belongs in an in-process tier).
    const others = files.filter((file) => !inProcessTiers.includes(tierOf(file) as never));
    expect(others.filter((file) => !starterChain(file))).toEqual([]);
  });
});
