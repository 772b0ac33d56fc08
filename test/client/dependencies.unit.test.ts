/**
 * What installing @runplane/client brings: three libraries, each pinned, each running in browsers
 * as in Node (graphql-ws's client, @0no-co/graphql.web, eventsource-parser for SSE framing).
 * gql.tada is an optional peer, imported for types only (`/typed`): the compiler it needs is never
 * installed for the client. That the client imports nothing else is Biome's check (biome.json).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';

const root = new URL('../../packages/client/', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

test('three dependencies, each pinned to one version; gql.tada an optional peer', () => {
  expect(Object.keys(manifest.dependencies).sort()).toEqual(['@0no-co/graphql.web', 'eventsource-parser', 'graphql-ws']);
  for (const [name, version] of Object.entries(manifest.dependencies)) expect(version, name).toMatch(/^\d+\.\d+\.\d+$/);
  expect(Object.keys(manifest.peerDependencies)).toEqual(['gql.tada']);
  expect(manifest.peerDependenciesMeta['gql.tada']?.optional).toBe(true);
});

test('gql.tada is imported for types only', () => {
  const dir = new URL('src/', root);
  const importing = readdirSync(dir)
    .filter((file) => file.endsWith('.ts'))
    .flatMap((file) =>
      [...readFileSync(new URL(file, dir), 'utf8').matchAll(/^\s*(import|export)\b(.*?)from\s+'gql\.tada'/gm)]
        // A declaration file's imports are types by nature.
        .filter((match) => !/^\s*(import|export)\s+type\b/.test(match[0]) && !file.endsWith('.d.ts'))
        .map(() => file),
    );
  expect(importing).toEqual([]);
});

test('eventsource-parser reaches for nothing of Node', () => {
  const parser = readFileSync(new URL('../../node_modules/eventsource-parser/dist/index.js', import.meta.url), 'utf8');
  expect(parser).not.toMatch(/\bfrom\s*["'](node:|[a-z])|\brequire\(|\bprocess\.|\bBuffer\b/);
});
