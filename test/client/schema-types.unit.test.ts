/**
 * packages/client/src/graphql-env.d.ts is what types the client's documents: schema.graphql's
 * introspection, for gql.tada. It is generated here (`npm run schema`); this fails when it is stale.
 */
import { readFileSync } from 'node:fs';
import { minifyIntrospection, outputIntrospectionFile } from '@gql.tada/internal';
import { buildSchema, introspectionFromSchema } from 'graphql';
import { expect, test } from 'vitest';

test('the client is typed from schema.graphql as it is', async () => {
  const schema = buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));
  // Named, so that the file declares the types alone and changes no other user of gql.tada.
  const introspection = { ...minifyIntrospection(introspectionFromSchema(schema)), name: 'runplane' };
  const file = outputIntrospectionFile(introspection, {
    fileType: '.d.ts',
    shouldPreprocess: true,
    preamble: '/* Generated from schema.graphql by test/client/schema-types.unit.test.ts (npm run schema): do not edit. */\n',
  });
  await expect(file).toMatchFileSnapshot('../../packages/client/src/graphql-env.d.ts');
});
