/**
 * The client depends on nothing of the server: its modules import each other and four libraries,
 * nothing else, each of which runs in browsers as in Node (graphql-ws's client, gql.tada's
 * runtime, @0no-co/graphql.web, eventsource-parser for SSE framing).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';

const dir = new URL('../../src/client/', import.meta.url);
const allowed = /^(\.\/[\w-]+\.(d\.)?ts|gql\.tada|@0no-co\/graphql\.web|graphql-ws\/client|eventsource-parser)$/;

test.each(readdirSync(dir).filter((file) => file.endsWith('.ts')))('src/client/%s imports only the client and its libraries', (file) => {
  const source = readFileSync(new URL(file, dir), 'utf8');
  const imported = [...source.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gm)].map((match) => match[1]);
  expect(imported.filter((specifier) => !allowed.test(specifier ?? ''))).toEqual([]);
});

test('each library the client imports is a dependency pinned to one version, and eventsource-parser reaches for nothing of Node', () => {
  const { dependencies } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  for (const name of ['gql.tada', '@0no-co/graphql.web', 'graphql-ws', 'eventsource-parser']) {
    expect(dependencies[name], name).toMatch(/^\d+\.\d+\.\d+$/);
  }
  const parser = readFileSync(new URL('../../node_modules/eventsource-parser/dist/index.js', import.meta.url), 'utf8');
  expect(parser).not.toMatch(/\bfrom\s*["'](node:|[a-z])|\brequire\(|\bprocess\.|\bBuffer\b/);
});
