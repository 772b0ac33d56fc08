/**
 * Every document the client sends is valid against schema.graphql as graphql-js sees it:
 * arguments and variable types included, which gql.tada's types do not check.
 */
import { readFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import { expect, test } from 'vitest';
import { documentText } from '../../packages/client/src/graphql.ts';
import * as operations from '../../packages/client/src/operations.ts';

const schema = buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));

test.each(Object.entries(operations))('%s is valid against schema.graphql', (_, document) => {
  expect(validate(schema, parse(documentText(document))).map((error) => error.message)).toEqual([]);
});
