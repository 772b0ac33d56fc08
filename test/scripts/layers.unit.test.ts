/**
 * The layer rule and the packages' seams are Biome's to enforce (biome.json's overrides, run by
 * `npm run lint` in CI). Here each kind of crossing is written into a file of the layer for a
 * moment, beside an import the layer may make, and one Biome run must refuse every crossing and
 * none of the others: a rule turned off or a pattern that matches nothing fails this test.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIOME = fileURLToPath(new URL('../../node_modules/@biomejs/biome/bin/biome', import.meta.url));
const RESTRICTED = 'lint/style/noRestrictedImports';
const UNDECLARED = 'lint/correctness/noUndeclaredDependencies';

/** [folder, an import it may not make and the rule that refuses it, an import it may make]. */
const cases: [folder: string, crossing: string, rule: string, allowed: string][] = [
  ['src/table', '../store/index.ts', RESTRICTED, '../domain/run.ts'],
  ['src/store', '../streams/hub.ts', RESTRICTED, '../table/keys.ts'],
  ['src/streams', '../schema/index.ts', RESTRICTED, '../store/index.ts'],
  ['src/schema', '../http/app.ts', RESTRICTED, '../store/index.ts'],
  ['src/domain', '../lib/backoff.ts', RESTRICTED, './run.ts'],
  ['src/lib', '../domain/run.ts', RESTRICTED, './backoff.ts'],
  ['src/http', '../server.ts', RESTRICTED, '../schema/index.ts'],
  ['src/console', '../http/app.ts', RESTRICTED, '@runplane/client'],
  ['packages/client/src', '../../../src/server.ts', RESTRICTED, './errors.ts'],
  ['packages/client/src', '@runplane/engine', RESTRICTED, 'graphql-ws/client'],
  ['packages/client/src', '@aws-sdk/client-dynamodb', UNDECLARED, 'eventsource-parser'],
  ['packages/engine/src', 'runplane/client', RESTRICTED, 'dynalite'],
  ['packages/engine/src', 'graphql-yoga', UNDECLARED, './index.ts'],
];

const tag = randomBytes(4).toString('hex');
const probes = cases.flatMap(([folder, crossing, , allowed], i) => [
  { file: `${folder}/layer-probe-${tag}-${i}-crossing.ts`, source: `import '${crossing}';\n` },
  { file: `${folder}/layer-probe-${tag}-${i}-allowed.ts`, source: `import '${allowed}';\n` },
]);
let reported: Map<string, string[]>;

beforeAll(() => {
  for (const { file, source } of probes) writeFileSync(`${ROOT}${file}`, source);
  let stdout: string;
  try {
    stdout = execFileSync(process.execPath, [BIOME, 'lint', '--reporter=json', '--max-diagnostics=none', ...probes.map((p) => p.file)], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: 'pipe',
    });
  } catch (err) {
    stdout = (err as { stdout: string }).stdout;
  }
  reported = new Map();
  for (const { category, location } of (JSON.parse(stdout) as { diagnostics: { category: string; location: { path: string } }[] })
    .diagnostics)
    reported.set(location.path, [...(reported.get(location.path) ?? []), category]);
}, 60_000);

afterAll(() => {
  for (const { file } of probes) rmSync(`${ROOT}${file}`, { force: true });
});

test.each(cases.map((c, i) => [...c, i] as const))('%s: %s is refused (%s), %s is not', (folder, _crossing, rule, _allowed, i) => {
  expect(reported.get(`${folder}/layer-probe-${tag}-${i}-crossing.ts`)).toContain(rule);
  expect(reported.get(`${folder}/layer-probe-${tag}-${i}-allowed.ts`) ?? []).toEqual([]);
});
