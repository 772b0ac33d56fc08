/** graphql-yoga, set up once for HTTP, SSE and (through its envelope) graphql-ws: one context, one set of plugins. */
import type { IncomingMessage } from 'node:http';
import type { GraphQLSchema } from 'graphql';
import { createYoga, type Plugin } from 'graphql-yoga';
import type { Principal } from '../domain/principal.ts';
import type { FairShares } from '../lib/fair-shares.ts';
import type { Connection, Context } from '../schema/context.ts';
import type { Admission } from './admission.ts';
import type { ApiKeys } from './api-keys.ts';
import type { CostRules } from './cost.ts';
import { type DocumentCache, documentCaching } from './document-cache.ts';
import type { Mask } from './errors.ts';
import { guards } from './guards.ts';
import { type Served, served, unauthenticated } from './principals.ts';
import type { Sessions } from './sessions.ts';
import { sseAdmission } from './sse-admission.ts';
import { sharedDelivery, sseDelivery } from './subscriptions/index.ts';

export interface YogaOptions {
  schema: GraphQLSchema;
  context: (principal: Principal, connection: Connection) => Context;
  introspection: boolean;
  suggestions: boolean;
  cost: CostRules;
  /** The cost executing at once, shared fairly between tenants. */
  costShares?: FairShares;
  mask: Mask;
  admission: Admission;
  sessions: Sessions;
  apiKeys: ApiKeys;
  /** Parsed and validated documents, bounded in bytes and per tenant. */
  documents: DocumentCache;
  /** Whether a graceful stop began (SSE streams then end without `complete`). */
  stopping: () => boolean;
  /** envelop plugins after the server's own (they see what clients are sent). */
  plugins?: Plugin[];
}

export function createYogaServer(options: YogaOptions) {
  return createYoga<{ req: IncomingMessage }, Context>({
    schema: options.schema,
    graphqlEndpoint: '/graphql',
    // HTTP: who asked was settled before yoga saw the request; WebSocket: onSubscribe hands it in.
    context: (initial) => {
      const given = initial as Partial<Served> & { req?: IncomingMessage };
      const known = given.principal && given.connection ? (given as Served) : given.req && served.get(given.req);
      if (!known) throw unauthenticated('An API key is required: Authorization: Bearer <key>');
      // Revoked while the body was on its way (the key was checked when the headers came).
      if (!options.apiKeys.stillValid(known.principal)) throw unauthenticated('This API key was revoked');
      return options.context(known.principal, known.connection);
    },
    // GraphiQL is served before yoga sees the request (compressed, cached: http/graphiql.ts).
    graphiql: false,
    landingPage: false,
    // Never stack traces or DynamoDB internals to clients, whatever NODE_ENV says.
    maskedErrors: { maskError: options.mask, isDev: false },
    // One operation per request: a batch would multiply every limit.
    batching: false,
    // Browsers are let in by origin before yoga sees a request (http/browsers.ts); yoga's own CORS
    // would answer every origin with itself.
    cors: false,
    // The body's size is settled before yoga sees the request (routes.ts: 413 over the limit, 411
    // without a Content-Length, and Node's parser reads no byte past it); yoga's own check pipes
    // every body through a stream of its own, about a twentieth of an append's server CPU.
    maxRequestBodySize: false,
    // Replaced by a cache bounded in bytes and shared fairly between tenants (http/document-cache.ts).
    parserAndValidationCache: false,
    plugins: [
      ...guards({
        introspection: options.introspection,
        suggestions: options.suggestions,
        cost: options.cost,
        costShares: options.costShares,
      }),
      documentCaching(options.documents),
      sseAdmission(options.admission, options.sessions, options.apiKeys) as never,
      sharedDelivery({ plain: !options.plugins?.length }),
      sseDelivery(options.mask, options.stopping),
      ...(options.plugins ?? []),
    ],
    logging: false,
  });
}

export type YogaServer = ReturnType<typeof createYogaServer>;
