/**
 * Limits for hostile GraphQL, applied alike over HTTP, WebSocket and SSE (graphql-ws goes
 * through yoga's envelope too): depth, aliases, tokens, cost and directives (graphql-armor),
 * CSRF prevention, read-only keys, and introspection off where configured.
 */
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { GraphQLError, getOperationAST, NoSchemaIntrospectionCustomRule } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from './context.ts';
import { nesting } from './document-depth.ts';

export interface GuardOptions {
  introspection: boolean;
  /** Tell clients the nearest field name when they misspell one (off in production: it reveals the schema). */
  fieldSuggestions: boolean;
}

/**
 * The cost counts a connection's fields times its literal `first`/`last`: a page of 500
 * with a dozen fields passes, a page of pages (runs(first: 500) { ... events(first: 500) }) does not.
 */
export const queryLimits = { depth: 12, aliases: 15, tokens: 5000, cost: 100_000, directives: 20 } as const;

/** Nesting allowed in a document's text: far above any real query, far below what overflows the parser's stack. */
export const MAX_NESTING = 64;

/** Refuses a document nested so deep that parsing it would exhaust the stack, before parsing. */
const shallowDocuments: Plugin<Context> = {
  onParse({ params }) {
    const source = typeof params.source === 'string' ? params.source : params.source.body;
    if (nesting(source) > MAX_NESTING) {
      throw new GraphQLError(`The document nests deeper than ${MAX_NESTING} levels`, {
        extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
      });
    }
  },
};

/** Mutations need a key that may write. */
const readOnlyKeys: Plugin<Context> = {
  onExecute({ args, setResultAndStopExecution }) {
    const operation = getOperationAST(args.document, args.operationName);
    if (operation?.operation === 'mutation' && (args.contextValue as Context).role === 'read') {
      setResultAndStopExecution({
        errors: [
          new GraphQLError('This API key is read-only: mutations are refused', {
            extensions: { code: 'FORBIDDEN', http: { status: 403 } },
          }),
        ],
      });
    }
  },
};

export function guards({ introspection, fieldSuggestions }: GuardOptions): Plugin<Context>[] {
  const plugins: Plugin<Context>[] = [
    shallowDocuments,
    EnvelopArmorPlugin({
      maxDepth: { n: queryLimits.depth, ignoreIntrospection: true },
      maxAliases: { n: queryLimits.aliases },
      maxTokens: { n: queryLimits.tokens },
      costLimit: { maxCost: queryLimits.cost, ignoreIntrospection: true },
      maxDirectives: { n: queryLimits.directives },
      blockFieldSuggestion: { enabled: !fieldSuggestions },
    }) as Plugin<Context>,
    // A request a browser sends without a preflight (a plain GET, a form post) needs this header.
    useCSRFPrevention({ requestHeaders: ['x-graphql-yoga-csrf'] }) as Plugin<Context>,
    readOnlyKeys,
  ];
  if (!introspection) {
    plugins.push({
      onValidate({ addValidationRule }) {
        addValidationRule(NoSchemaIntrospectionCustomRule);
      },
    });
  }
  return plugins;
}
