/** schema.graphql is generated from the Pothos schema (`npm run schema`); this fails when it is stale. */
import { lexicographicSortSchema, printSchema } from 'graphql';
import { expect, test } from 'vitest';
import { schema } from '../../src/schema/index.ts';

test('schema.graphql is what the server serves', async () => {
  await expect(`${printSchema(lexicographicSortSchema(schema))}\n`).toMatchFileSnapshot('../../schema.graphql');
});
