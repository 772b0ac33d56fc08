/**
 * `@runplane/client/typed`: `graphql` typed from schema.graphql by gql.tada, in your editor
 * and typecheck, with no code generation step. Needs `gql.tada` installed beside the client
 * (an optional peer: it brings the TypeScript compiler); at run time this is the client's own
 * `graphql`, the same documents.
 *
 *   import { graphql } from '@runplane/client/typed';
 *   const RunStatus = graphql('query($id: ID!) { run(id: $id) { status } }');
 */
import type { initGraphQLTada } from 'gql.tada';
import { type Json, graphql as untyped } from './graphql.ts';
import type { introspection } from './graphql-env.d.ts';

type SchemaTyped = ReturnType<
  typeof initGraphQLTada<{
    introspection: introspection;
    scalars: { DateTime: string; JSON: Json };
    // Fragments spread into a document are typed in place (no masks to read through).
    disableMasking: true;
  }>
>;

/** Creates a document typed from the schema: `graphql('query($id: ID!) { run(id: $id) { status } }')`. */
export const graphql = untyped as unknown as SchemaTyped;
export type { ResultOf, VariablesOf } from 'gql.tada';
