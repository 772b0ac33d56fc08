/**
 * The HTTP side: node:http with the routes that come before yoga (http/routes.ts), yoga for
 * GraphQL over HTTP and SSE (http/yoga.ts), and graphql-ws on the same path
 * (http/websocket.ts), sharing one set of admissions, revocable sessions and limits.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { DEFAULT_PAGE_SIZE, type Limits } from '../domain/limits.ts';
import type { Principal } from '../domain/principal.ts';
import type { FairShares } from '../lib/fair-shares.ts';
import type { Logger } from '../lib/logger.ts';
import type { Connection, Context } from '../schema/context.ts';
import { tableReadsOf } from '../schema/table-reads.ts';
import { type Admission, createAdmission, type UsageElsewhere } from './admission.ts';
import type { ApiKeys } from './api-keys.ts';
import { bodyShares } from './body-shares.ts';
import { browserPolicy } from './browsers.ts';
import { type ConnectionLimits, guardConnections } from './connections.ts';
import { consoleFiles } from './console.ts';
import type { CostRules } from './cost.ts';
import type { DocumentCache } from './document-cache.ts';
import { type AvailabilityOf, maskError } from './errors.ts';
import { graphiqlPage } from './graphiql.ts';
import { costShares } from './guards.ts';
import { connectionFactory } from './principals.ts';
import { requestHandler } from './routes.ts';
import { createSessions } from './sessions.ts';
import { attachWebSockets } from './websocket.ts';
import { createYogaServer } from './yoga.ts';

export interface AppDeps {
  schema: GraphQLSchema;
  apiKeys: ApiKeys;
  /** The context of one operation, for the principal its key belongs to, on the connection it came on. */
  context: (principal: Principal, connection: Connection) => Context;
  graphiql: boolean;
  /** Serve the run console at `/`. */
  console: boolean;
  introspection: boolean;
  /** Tell clients the nearest name when they misspell one (off in production: it reveals the schema). */
  suggestions: boolean;
  /** Largest request body (and WebSocket message) accepted. */
  maxBodyBytes: number;
  /** Request bodies being read at once, shared fairly between tenants (default: 8 x / 1 x maxBodyBytes). */
  bodyShares?: FairShares;
  /** The cost of the queries and mutations executing at once, shared fairly between tenants (default: made from `limits`). */
  costShares?: FairShares;
  /** Origins served besides this server's own; names it answers to (open) besides loopback ones; the address it listens on. */
  browsers: { corsOrigins: readonly string[]; allowedHosts: readonly string[]; listenHost: string };
  /** Parsed documents kept for reuse, bounded in bytes (a tenant holds at most a quarter). */
  documents: DocumentCache;
  limits: Limits;
  connections: ConnectionLimits;
  /** Where unexpected errors go in full (clients only see a masked message). */
  log: Logger;
  /** The text served at GET /metrics (Prometheus format); absent: no /metrics. */
  metrics?: () => string;
  /** GET /ready: whether DynamoDB answers now (absent: always ready). */
  ready?: () => Promise<{ ready: boolean; reason?: string; degraded?: string }>;
  /** Where every connection's send buffer adds what it holds (for /metrics). */
  sendBuffers?: { held: number };
  /** What each tenant holds open on the other replicas (with Redis): the tenant caps count it too. */
  usageElsewhere?: UsageElsewhere;
  /** Which DynamoDB failures are worth retrying (the client is told so). */
  availabilityOf: AvailabilityOf;
  /** envelop plugins after the server's own. */
  plugins?: Plugin[];
}

export interface App extends AsyncDisposable {
  readonly server: Server;
  readonly admission: Admission;
  /** The parsed documents kept (tests and /metrics read it). */
  readonly documents: DocumentCache;
  /** Listens; resolves to the /graphql URL. */
  start(port: number, host: string): Promise<string>;
  /**
   * Begins a graceful stop: WebSockets are closed with 1012 (come back), SSE streams end
   * without `complete` once their feeds end. Called by stop(); the composition root calls it
   * first, before it ends the feeds.
   */
  closeStreams(): void;
  /** Closes the streams, stops accepting, and waits (up to `graceMs`) for requests in flight. */
  stop(graceMs?: number): Promise<void>;
}

/** What an operation may cost under `limits` (http/cost.ts), for HTTP, SSE and WebSocket alike. */
export function costRules(limits: Limits): CostRules {
  return {
    maxCost: limits.maxQueryCost,
    maxPageSize: limits.maxPageSize,
    defaultPageSize: DEFAULT_PAGE_SIZE,
    // Sized by what they may hold: a payload per KB of its limit; a page of output text (about 1 MB) likewise.
    weights: { 'Event.payload': Math.ceil(limits.maxPayloadBytes / 1024), 'Run.output': 1024 },
    readsOf: (field) => tableReadsOf(field.extensions, limits),
  };
}

export function buildApp(deps: AppDeps): App {
  const { limits, connections, log } = deps;
  const admission = createAdmission(connections, deps.usageElsewhere);
  const sessions = createSessions();
  const { documents } = deps;
  const browsers = browserPolicy({ ...deps.browsers, open: deps.apiKeys.open });
  const cost = costRules(limits);
  const mask = maskError((err) => log.error('unexpected error', err), deps.availabilityOf);
  const newConnection = connectionFactory(connections.sendBufferBytes, deps.sendBuffers);
  /** Set once a graceful stop began: streams then end without `complete` (clients come back). */
  let stopping = false;

  const executing = deps.costShares ?? costShares(limits.costInFlight, limits.tenantCostInFlight);
  const bodies = deps.bodyShares ?? bodyShares(8 * deps.maxBodyBytes, deps.maxBodyBytes);
  const yoga = createYogaServer({ ...deps, cost, costShares: executing, mask, admission, sessions, documents, stopping: () => stopping });
  const page = deps.graphiql ? graphiqlPage({ endpoint: yoga.graphqlEndpoint }) : undefined;
  const server = createServer(
    { connectionsCheckingInterval: 1_000 },
    requestHandler({ ...deps, yoga, bodies, newConnection, page, browsers, console: deps.console ? consoleFiles() : undefined }),
  );
  const guarded = guardConnections(server, connections);
  const webSockets = attachWebSockets(server, { ...deps, yoga, admission, sessions, cost, mask, newConnection, browsers });
  const stopWatching = deps.apiKeys.watch((keyIds) => sessions.revoke(keyIds));

  const closeStreams = () => {
    stopping = true;
    webSockets.closeAll();
  };
  const stop = async (graceMs = 5_000) => {
    stopWatching[Symbol.dispose]();
    closeStreams();
    await webSockets.dispose();
    await new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeIdleConnections();
      // Requests in flight get `graceMs` to finish; whatever still holds a socket then is cut.
      const deadline = setTimeout(() => {
        for (const socket of guarded.sockets) socket.destroy();
      }, graceMs);
      deadline.unref();
      server.once('close', () => clearTimeout(deadline));
    });
    guarded.stop();
  };

  return {
    server,
    admission,
    documents,
    start: (port, host) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          const address = server.address() as AddressInfo;
          const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          resolve(`http://${shown}:${address.port}${yoga.graphqlEndpoint}`);
        });
      }),
    closeStreams,
    stop,
    [Symbol.asyncDispose]: () => stop(),
  };
}
