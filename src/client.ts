/**
 * `runplane/client`: the client under the name code was written against before it was a
 * package of its own (`@runplane/client`), with `graphql` typed from the schema as it was then
 * (`@runplane/client/typed`: gql.tada, an optional peer).
 */
export * from '@runplane/client';
export { graphql, type ResultOf, type VariablesOf } from '@runplane/client/typed';
