/**
 * Limits for hostile GraphQL, applied alike over HTTP, WebSocket and SSE (graphql-ws goes
 * through yoga's envelope too): depth, aliases, tokens, cost and directives (graphql-armor),
 * CSRF prevention, read-only keys, and introspection off where configured.
 */
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { type ExecutionArgs, GraphQLError, getOperationAST, NoSchemaIntrospectionCustomRule } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { FairShares } from '../lib/fair-shares.ts';
import type { Context } from '../schema/context.ts';
import { codes } from '../schema/error-codes.ts';
import { type CostRules, checkCost } from './cost.ts';
import { nesting } from './document-depth.ts';

export interface GuardOptions {
  introspection: boolean;
  /** Tell clients the nearest field or enum value when they misspell one (off in production: it reveals the schema). */
  suggestions: boolean;
  cost: CostRules;
  /** The cost of the queries and mutations executing at once, shared fairly between tenants. */
  costShares?: FairShares;
}

/** Depth, aliases, tokens and directives of one document (the cost is checked with its variables: http/cost.ts). */
export const queryLimits = { depth: 12, aliases: 15, tokens: 5000, directives: 20 } as const;

/** "Did you mean ...?" as graphql-js words it for fields, arguments, types and enum values. */
const SUGGESTION = /\s*Did you mean [^?]*\?/g;
const suggests = (message: string) => message.includes('Did you mean');
export const withoutSuggestions = (message: string) => message.replace(SUGGESTION, '');

/** Strips suggestions from every error a request can get: validation, and variables that do not coerce. */
const noSuggestions: Plugin<Context> = {
  onValidate:
    () =>
    ({ result, setResult }) => {
      if (result.some((error) => suggests(error.message))) {
        setResult(result.map((error) => new GraphQLError(withoutSuggestions(error.message), error)));
      }
    },
  onExecute: () => ({
    onExecuteDone({ result, setResult }) {
      if (!('errors' in result) || !result.errors?.some((error) => suggests(error.message))) return;
      setResult({ ...result, errors: result.errors.map((error) => new GraphQLError(withoutSuggestions(error.message), error)) });
    },
  }),
};

/**
 * The cost limit, with variables applied, before an operation runs (HTTP and SSE; graphql-ws
 * calls checkCost itself too). A query or mutation then waits for room for its cost among what
 * executes at once (its tenant's share of it): the memory and work of executing is a pool like
 * any other, and one tenant's costly queries run one after another, not all at once.
 */
function costLimit(rules: CostRules, shares: FairShares | undefined): Plugin<Context> {
  const refuse = (args: ExecutionArgs, stop: (result: { errors: GraphQLError[] }) => void) => {
    try {
      return checkCost(args.schema, args.document, args.operationName, args.variableValues, rules);
    } catch (err) {
      if (!(err instanceof GraphQLError)) throw err;
      stop({ errors: [err] });
    }
  };
  return {
    onExecute: ({ args, executeFn, setExecuteFn, setResultAndStopExecution }) => {
      const cost = refuse(args, setResultAndStopExecution);
      if (cost === undefined || !shares) return;
      const tenant = (args.contextValue as Context).tenant;
      setExecuteFn(async (executing) => {
        let place: ReturnType<FairShares['acquire']>;
        try {
          place = shares.acquire(tenant, Math.max(1, cost));
        } catch (err) {
          if (err instanceof GraphQLError) return { errors: [err] };
          throw err;
        }
        const release = typeof place === 'function' ? place : await place;
        try {
          return await executeFn(executing);
        } finally {
          release();
        }
      });
    },
    onSubscribe: ({ args, setResultAndStopExecution }) => void refuse(args, setResultAndStopExecution),
  };
}

/** Queries and mutations one tenant may have waiting for room to execute; past it the next is refused (RATE_LIMITED). */
const MAX_WAITING_OPERATIONS = 64;

/** The pool of cost executing at once: `total` in all, `perTenant` for one tenant. */
export const costShares = (total: number, perTenant: number) =>
  new FairShares({
    total,
    perTenant,
    maxWaitingPerTenant: MAX_WAITING_OPERATIONS,
    refuse: () =>
      new GraphQLError(
        `This tenant has ${MAX_WAITING_OPERATIONS} queries waiting for their turn to execute already (RUNPLANE_TENANT_COST_IN_FLIGHT): retry in a moment`,
        { extensions: { code: codes.rateLimited, retryAfterMs: 250, http: { status: 429 } } },
      ),
  });

/** Nesting allowed in a document's text: far above any real query, far below what overflows the parser's stack. */
export const MAX_NESTING = 64;

/** Refuses a document nested so deep that parsing it would exhaust the stack, before parsing. */
const shallowDocuments: Plugin<Context> = {
  onParse({ params }) {
    const source = typeof params.source === 'string' ? params.source : params.source.body;
    if (nesting(source) > MAX_NESTING) {
      throw new GraphQLError(`The document nests deeper than ${MAX_NESTING} levels`, {
        extensions: { code: codes.badRequest, http: { status: 400 } },
      });
    }
  },
};

/** Content types a browser sends without a CORS preflight. */
const SIMPLE_CONTENT_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

/**
 * A request a browser may send from another site without a preflight (a plain GET, a form
 * post) needs the `x-graphql-yoga-csrf` header, which such a page cannot set. Except a GET
 * that asks for an event stream: EventSource cannot set headers at all, a GET never runs a
 * mutation (yoga refuses them), and another site cannot read the stream it opens.
 */
const csrfPrevention: Plugin<Context> = {
  onRequestParse({ request }) {
    const contentType = request.headers.get('content-type')?.toLowerCase();
    if (contentType && !SIMPLE_CONTENT_TYPES.some((simple) => contentType.startsWith(simple))) return;
    if (request.headers.has('x-graphql-yoga-csrf')) return;
    if (request.method === 'GET' && /\btext\/event-stream\b/.test(request.headers.get('accept') ?? '')) return;
    throw new GraphQLError('Required CSRF header(s) not present: send x-graphql-yoga-csrf (any value)', {
      extensions: { code: codes.badRequest, http: { status: 403 } },
    });
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
            extensions: { code: codes.forbidden, http: { status: 403 } },
          }),
        ],
      });
    }
  },
};

export function guards({ introspection, suggestions, cost, costShares: shares }: GuardOptions): Plugin<Context>[] {
  const plugins: Plugin<Context>[] = [
    shallowDocuments,
    EnvelopArmorPlugin({
      maxDepth: { n: queryLimits.depth, ignoreIntrospection: true },
      maxAliases: { n: queryLimits.aliases },
      maxTokens: { n: queryLimits.tokens },
      costLimit: { enabled: false },
      maxDirectives: { n: queryLimits.directives },
      blockFieldSuggestion: { enabled: false },
    }) as Plugin<Context>,
    costLimit(cost, shares),
    csrfPrevention,
    readOnlyKeys,
  ];
  if (!suggestions) plugins.push(noSuggestions);
  if (!introspection) {
    plugins.push({
      onValidate({ addValidationRule }) {
        addValidationRule(NoSchemaIntrospectionCustomRule);
      },
    });
  }
  return plugins;
}
