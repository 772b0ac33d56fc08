/** The test run starts its processes from bundles of their sources (scripts/process-bundles.ts). */
import { existsSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { ENTRY_POINTS, nodeArgs } from '../../scripts/process-bundles.ts';

const bundleOf = (script: string) => nodeArgs(script).at(-1) as string;

test('every entry point the tests start has a bundle in this run', () => {
  for (const script of ENTRY_POINTS) {
    expect(nodeArgs(script)[0], script).toBe('--enable-source-maps');
    expect(existsSync(bundleOf(script)), script).toBe(true);
  }
});

test('a script without a bundle runs from its source through tsx', () => {
  expect(nodeArgs('chaos/run.ts')).toEqual(['--import', 'tsx', 'chaos/run.ts']);
});

test('a bundled module keeps its own import.meta.url, and the script finds itself in process.argv[1]', () => {
  const code = readFileSync(bundleOf('src/main.ts'), 'utf8');
  expect(code).not.toContain('import.meta.url');
  // The console's assets are found next to the module that serves them.
  expect(code).toContain(JSON.stringify(new URL('../../src/http/console.ts', import.meta.url).href));
  expect(code.startsWith(`process.argv[1] = ${JSON.stringify(new URL('../../src/main.ts', import.meta.url).pathname)};`)).toBe(true);
});
