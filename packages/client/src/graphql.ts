/**
 * Documents and their types, with no compiler at run time: a document is a parsed DocumentNode
 * carrying its result and variables as types only (the typed-document-node convention, which
 * gql.tada, urql and graphql-codegen share). The client's own documents (operations.ts) are
 * typed from schema.graphql by gql.tada while it is built, and ship with those types written out.
 * Schema-typed documents of your own: `@runplane/client/typed` (gql.tada, an optional peer).
 */
import { type DocumentNode, type FragmentDefinitionNode, Kind, parse, print } from '@0no-co/graphql.web';

/** Any JSON value. */
export type Json = NonNullable<unknown> | null;

/** A document typed with what it answers and what it takes. */
export interface TypedDocument<Result = { [key: string]: unknown }, Variables = { [key: string]: unknown }> extends DocumentNode {
  /** Types only (never set): what the document answers, given its variables. */
  __apiType?: (variables: Variables) => Result;
}

/** What a typed document answers. */
export type ResultOf<D> = D extends { __apiType?: (variables: never) => infer Result } ? Result : never;
/** What a typed document takes. */
export type VariablesOf<D> = D extends { __apiType?: (variables: infer Variables) => unknown } ? Variables : never;

/** A document of any operation. */
// biome-ignore lint/suspicious/noExplicitAny: any result and variables
export type Document = TypedDocument<any, any>;

/** True where a result type holds `unknown`: a field gql.tada could not find in the schema. */
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
 * What a document passed to the client must also be: a schema-typed one (`/typed`) selecting a
 * field that schema.graphql does not have fails the caller's typecheck here. An untyped
 * document (`graphql` below) answers `unknown` and passes.
 */
export type ValidDocument<D extends Document> = [ResultOf<D>] extends [never]
  ? { 'this document does not parse': never }
  : unknown extends ResultOf<D>
    ? unknown
    : true extends HasUnknown<ResultOf<D>>
      ? { 'this document selects a field that schema.graphql does not have': never }
      : unknown;

/**
 * A document from its text, with the fragments it spreads: `graphql('query($id: ID!) { run(id:
 * $id) { status } }')`. Typed by what you say it answers (`graphql<Result, Variables>(...)`), or
 * `unknown`; `@runplane/client/typed` types it from the schema instead.
 */
export function graphql<Result = unknown, Variables = { [key: string]: unknown }>(
  text: string,
  fragments: readonly DocumentNode[] = [],
): TypedDocument<Result, Variables> {
  const definitions = [...parse(text).definitions];
  const added = new Set<FragmentDefinitionNode>();
  for (const fragment of fragments)
    for (const definition of fragment.definitions)
      if (definition.kind === Kind.FRAGMENT_DEFINITION && !added.has(definition)) {
        definitions.push(definition);
        added.add(definition);
      }
  return { kind: Kind.DOCUMENT, definitions };
}

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
