/** The test run starts its processes from bundles of their sources (scripts/process-bundles.ts). */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { ENTRY_POINTS, nodeArgs, removeBundlesOfEndedRuns } from '../../scripts/process-bundles.ts';

const bundleOf = (script: string) => nodeArgs(script).at(-1) as string;

test('every entry point the tests start has a bundle in this run', () => {
  for (const script of ENTRY_POINTS) {
    expect(nodeArgs(script)[0], script).toBe('--enable-source-maps');
    expect(existsSync(bundleOf(script)), script).toBe(true);
  }
});

test('a script without a bundle runs from its source through tsx', () => {
  expect(nodeArgs('chaos/run.ts')).toEqual(['--conditions=runplane-source', '--import', 'tsx', 'chaos/run.ts']);
});

test('a bundled module keeps its own import.meta.url, and the script finds itself in process.argv[1]', () => {
  const code = readFileSync(bundleOf('src/main.ts'), 'utf8');
  expect(code).not.toContain('import.meta.url');
  // The console's assets are found next to the module that serves them.
  expect(code).toContain(JSON.stringify(new URL('../../src/http/console.ts', import.meta.url).href));
  expect(
    code.startsWith(`'use strict';\nprocess.argv[1] = ${JSON.stringify(fileURLToPath(new URL('../../src/main.ts', import.meta.url)))};`),
  ).toBe(true);
});

test("a run's setup removes the bundles of runs that ended without removing theirs, and no running run's", () => {
  const parent = mkdtempSync(join(tmpdir(), 'runplane-bundles-'));
  try {
    // No process has this id (Linux hands out at most 2^22, macOS fewer): a run that has ended.
    const ended = String(2 ** 22 + 1);
    for (const name of [ended, String(process.pid), String(process.ppid), 'not-a-run']) mkdirSync(join(parent, name));
    expect(removeBundlesOfEndedRuns(parent)).toEqual([ended]);
    expect(readdirSync(parent).sort()).toEqual([String(process.pid), String(process.ppid), 'not-a-run'].sort());
    expect(removeBundlesOfEndedRuns(join(parent, 'none'))).toEqual([]);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});
