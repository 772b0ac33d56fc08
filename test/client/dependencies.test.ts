/** The client depends on nothing of the server: its modules import each other and three libraries, nothing else. */
import { readdirSync, readFileSync } from 'node:fs';
import { expect, test } from 'vitest';

const dir = new URL('../../src/client/', import.meta.url);
const allowed = /^(\.\/[\w-]+\.(d\.)?ts|gql\.tada|@0no-co\/graphql\.web|graphql-ws\/client)$/;

test.each(readdirSync(dir).filter((file) => file.endsWith('.ts')))('src/client/%s imports only the client and its libraries', (file) => {
  const source = readFileSync(new URL(file, dir), 'utf8');
  const imported = [...source.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gm)].map((match) => match[1]);
  expect(imported.filter((specifier) => !allowed.test(specifier ?? ''))).toEqual([]);
});
