import SchemaBuilder from '@pothos/core';
import ErrorsPlugin from '@pothos/plugin-errors';
import RelayPlugin from '@pothos/plugin-relay';
import ValidationPlugin from '@pothos/plugin-validation';
import { GraphQLError } from 'graphql';
import type { Context } from './context.ts';
import { codes } from './error-codes.ts';

type Issue = { message: string; path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> };

/** The refusal of invalid input: every issue, each named by the field it is about. */
export const invalidInput = (issues: ReadonlyArray<Issue>) =>
  new GraphQLError(
    `Invalid input: ${issues.map((issue) => `${issue.path?.map((p) => String(typeof p === 'object' ? p.key : p)).join('.') || 'input'}: ${issue.message}`).join('; ')}`,
    { extensions: { code: codes.badInput } },
  );

const capitalized = (name: string) => name.charAt(0).toUpperCase() + name.slice(1);

export const builder = new SchemaBuilder<{
  Context: Context;
  Scalars: {
    JSON: { Input: unknown; Output: unknown };
    DateTime: { Input: Date; Output: Date };
  };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: false;
}>({
  plugins: [ErrorsPlugin, RelayPlugin, ValidationPlugin],
  defaultFieldNullability: false,
  errors: {
    // Only errors a field lists become union members; anything else is a masked GraphQL error.
    defaultTypes: [],
    directResult: true,
    defaultUnionOptions: { name: ({ fieldName }) => `${capitalized(fieldName)}Result` },
  },
  relay: { clientMutationId: 'omit', cursorType: 'String', nodeQueryOptions: false, nodesQueryOptions: false },
  validation: { validationError: ({ issues }) => invalidInput(issues) },
});

builder.queryType({});
builder.mutationType({});
