/**
 * Typed GraphQL documents: gql.tada reads the schema's introspection (graphql-env.d.ts,
 * generated from schema.graphql; a test fails when it is stale) and types each document's
 * result and variables in the TypeScript type system, with no code generation step.
 */
import { print } from '@0no-co/graphql.web';
import { initGraphQLTada, type ResultOf, type TadaDocumentNode, type VariablesOf } from 'gql.tada';
import type { introspection } from './graphql-env.d.ts';

/**
 * Any JSON value. Not `unknown` on purpose: gql.tada types a field the schema does not have
 * as `unknown`, and that must stay distinguishable from a JSON payload (see ValidDocument).
 */
export type Json = NonNullable<unknown> | null;

/** Creates a typed document: `graphql('query($id: ID!) { run(id: $id) { status } }')`. */
export const graphql = initGraphQLTada<{
  introspection: introspection;
  scalars: { DateTime: string; JSON: Json };
  // Fragments spread into a document are typed in place (no masks to read through).
  disableMasking: true;
}>();

export type { ResultOf, VariablesOf };

/** A typed document of any operation. */
export type Document = TadaDocumentNode<unknown, never>;

/** True where a result type holds `unknown`: the field that gql.tada could not find in the schema. */
type HasUnknown<T> = 0 extends 1 & T
  ? false
  : unknown extends T
    ? true
    : T extends readonly (infer Item)[]
      ? HasUnknown<Item>
      : T extends object
        ? true extends { [K in keyof T]-?: HasUnknown<T[K]> }[keyof T]
          ? true
          : false
        : false;

/**
 * What a document passed to the client must also be: a document selecting a field that
 * schema.graphql does not have (or a leaf-less object field) fails `npm run typecheck` here.
 */
export type ValidDocument<D extends Document> = [ResultOf<D>] extends [never]
  ? { 'this document does not parse': never }
  : true extends HasUnknown<ResultOf<D>>
    ? { 'this document selects a field that schema.graphql does not have': never }
    : unknown;

const texts = new WeakMap<object, string>();

/** The document as sent on the wire, printed once. */
export function documentText(document: Document): string {
  let text = texts.get(document);
  if (text === undefined) {
    text = print(document);
    texts.set(document, text);
  }
  return text;
}

/** 'query', 'mutation' or 'subscription': the document's first operation. */
export function operationOf(document: Document) {
  for (const definition of document.definitions) {
    if (definition.kind === 'OperationDefinition') return definition.operation;
  }
  throw new TypeError('the document has no operation');
}
