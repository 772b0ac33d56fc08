/** Composition root: config -> engine (when embedded) -> table -> clients -> stores -> app. */

import { type EmbeddedEngine, startEngine } from '@runplane/engine';
import type { Plugin as EnvelopPlugin } from 'graphql-yoga';
import type { Config } from './config.ts';
import type { Change } from './domain/change.ts';
import type { Principal } from './domain/principal.ts';
import { createApiKeys } from './http/api-keys.ts';
import { type App, buildApp } from './http/app.ts';
import { bodyShares } from './http/body-shares.ts';
import { DocumentCache } from './http/document-cache.ts';
import { costShares } from './http/guards.ts';
import { metricsOf } from './http/metrics.ts';
import { StallWatcher } from './jobs/stall-watcher.ts';
import { consoleLogger, type Logger } from './lib/logger.ts';
import type { Connection, Context } from './schema/context.ts';
import { schema } from './schema/index.ts';
import { responseLimit } from './schema/response-limit.ts';
import { createStores, ReadShares, RequestReads, type Stores } from './store/index.ts';
import { createShardLeases } from './store/leases/shards.ts';
import { createOutputWriter, type OutputWriter } from './store/outputs/writer.ts';
import { ThrottleCounts, type ThrottleRetry } from './store/throttles.ts';
import { topics } from './streams/changes.ts';
import { type Live, startLive } from './streams/live.ts';
import { type Clients, createClients } from './table/client.ts';
import { ensureTable } from './table/ensure.ts';
import { availabilityOf } from './table/failures.ts';
import { readinessProbe } from './table/readiness.ts';

export interface RunningServer extends AsyncDisposable {
  /** The GraphQL endpoint (GraphiQL in a browser). */
  url: string;
  /** The HTTP side (its admissions are read by tests). */
  app: App;
  /** The DynamoDB endpoint in use (the embedded engine's when there is one). */
  dynamodbEndpoint: string | undefined;
  /** The embedded engine (its `endpoint` only with RUNPLANE_ENGINE_PORT). */
  engine: EmbeddedEngine | undefined;
  live: Live;
  /** The stores (their writes publish to subscribers as they land; tests wait on their background work). */
  stores: Stores;
  /** Live output's writing side (tests read what waits to be stored). */
  output: OutputWriter;
  /** Finds claimed runs whose claim ran out (one replica watches at a time). */
  watcher: StallWatcher;
  clients: Clients;
  tableCreated: boolean;
  /** Whether it serves everyone as the default tenant (no API keys configured). */
  open: boolean;
  /** The graceful stop (once, however often called). */
  stop(): Promise<void>;
}

export interface ServerOptions {
  /** Called with the SDK clients before anything uses them (tests count requests here). */
  onClients?: (clients: Clients) => void;

  /** Stream polling pace (tests and benchmarks tune it). */
  poll?: { minIntervalMs?: number; idleIntervalMs?: number; maxBackoffMs?: number };
  /** Where the server says what happened (default: stderr). */
  log?: Logger;
  /** With replicas: sends to Redis in flight before changes are not sent (tests lower it). */
  maxSendsInFlight?: number;
  /** envelop plugins after the server's own (tracing, metrics): they see every operation, over HTTP, SSE and WebSocket, and every subscription event. */
  plugins?: EnvelopPlugin[];
  /** How throttled writes are tried again (default THROTTLE_RETRY: 10 tries; tests shorten the waits). */
  throttleRetry?: ThrottleRetry;
}

export async function startServer(config: Config, options: ServerOptions = {}): Promise<RunningServer> {
  const log = options.log ?? consoleLogger;
  // Bad keys stop the start before anything else is started.
  const apiKeys = createApiKeys(config.auth, log);
  const engine = config.dynamodb.embedded
    ? await startEngine({
        // A port only when asked for: this process reaches its engine without one.
        listen: config.engine.port !== undefined,
        port: config.engine.port,
        host: '127.0.0.1',
        dataDir: config.engine.dataDir,
        partitionLimits: config.engine.partitionLimits,
        allowedHosts: config.engine.allowedHosts,
        cors: config.engine.cors,
        credentials: config.engine.credentials,
        settingNames: { allowedHosts: 'RUNPLANE_ENGINE_ALLOWED_HOSTS', cors: 'RUNPLANE_ENGINE_CORS' },
      })
    : undefined;
  if (engine?.endpoint && !config.engine.credentials) {
    log.warn(
      `the embedded engine's port ${engine.endpoint} takes requests from any local process (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to require requests signed with them)`,
    );
  }
  const clients = createClients({
    // Without a port, an address never dialled: requests are handed to the engine in this process.
    endpoint: engine ? (engine.endpoint ?? 'http://in-process.localhost') : config.dynamodb.endpoint,
    streamsEndpoint: engine ? undefined : config.dynamodb.streamsEndpoint,
    region: config.dynamodb.region,
    // In process nothing is signed: the environment's credentials are for the engine's port.
    credentials: engine || config.dynamodb.localCredentials ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined,
    inProcess: engine?.answer,
  });
  let live: Live | undefined;
  // Declared before live starts (its feeds ask for output waiting here), made once the stores are.
  let output: OutputWriter | undefined;
  try {
    options.onClients?.(clients);
    const tableCreated = await ensureTable(clients.dynamo, config.table, { create: config.dynamodb.createTable, log });
    const throttles = new ThrottleCounts();
    const storeDeps = {
      doc: clients.doc,
      tableName: config.table,
      now: () => new Date(),
      retention: config.retention,
      groupCommit: config.groupCommit,
      log,
      // Every write's changes reach this server's subscribers (and the other replicas') as it lands.
      publish: (change: Change) => live?.publish(change),
      throttles,
      throttleRetry: options.throttleRetry,
    };
    const stores = createStores(storeDeps);
    // Requests' and feeds' table reads in flight, shared fairly between tenants.
    const readShares = new ReadShares(config.reads);
    live = await startLive({
      clients,
      tableName: config.table,
      stores,
      readShares,
      poll: options.poll,
      log,
      gapWaitMs: config.gapWaitMs,
      outputWaiting: (tenant, runId, stream) => output?.waitingOf(tenant, runId, stream),
      // Live output ahead of a reader is usually text another server stores within a flush.
      outputGapMs: config.output.flushMs + 100,
      replicas: config.replicas && {
        ...config.replicas,
        tableName: config.table,
        leases: createShardLeases(storeDeps),
        maxSendsInFlight: options.maxSendsInFlight,
      },
    });
    // One watcher per table finds the claimed runs whose worker is gone (its writes publish: subscribers hear of it at once).
    const writer = createOutputWriter({
      store: stores.outputs,
      claimOf: async (tenant, runId) => (await stores.runs.head(tenant, runId))?.claim ?? null,
      watchRun: (tenant, runId, changed) =>
        live?.hub.subscribe(topics.run(tenant, runId), { change: changed, resync: changed }) ?? (() => undefined),
      publish: (change) => live?.publish(change),
      ...config.output,
      maxStreamsPerRun: config.limits.maxOutputStreams,
      log,
    });
    output = writer;
    const watcher = new StallWatcher({
      runs: stores.runs,
      leases: createShardLeases(storeDeps),
      owner: config.processId,
      intervalMs: config.stallCheckMs,
      log,
    });
    watcher.start();
    const feeds = live;
    const sendBuffers = { held: 0 };
    // What executes at once, by cost: one tenant's costly queries run a few at a time, not all at once.
    const executing = costShares(config.limits.costInFlight, config.limits.tenantCostInFlight);
    // Request bodies being read at once: one tenant's many large bodies are read a few at a time.
    const bodies = bodyShares(config.bodiesInFlight.total, config.bodiesInFlight.perTenant);
    const documents = new DocumentCache(config.documentCacheBytes);
    const tableReady = readinessProbe(clients, config.table);
    const replicas = live.replicas;
    const context = ({ tenant, role, keyId, name }: Principal, connection: Connection): Context => ({
      tenant,
      role,
      keyId,
      keyName: name,
      stores,
      live: feeds,
      output: writer,
      limits: config.limits,
      response: responseLimit(config.limits.maxResponseBytes),
      reads: new RequestReads(tenant, readShares, config.limits.maxRequestReads),
      connection,
    });
    const app = buildApp({
      schema,
      apiKeys,
      context,
      graphiql: config.graphiql,
      console: config.console,
      introspection: config.introspection,
      suggestions: !config.production,
      maxBodyBytes: config.maxBodyBytes,
      documents,
      usageElsewhere: replicas ? (tenant) => replicas.usage.of(tenant) : undefined,
      browsers: { ...config.browsers, listenHost: config.host },
      limits: config.limits,
      connections: config.connections,
      log,
      metrics: metricsOf({
        appends: stores.events.counters,
        live,
        sendBuffers,
        documents,
        stalls: watcher.counts,
        throttles,
        reads: readShares,
        executing,
        bodies,
        output: writer,
      }),
      costShares: executing,
      bodyShares: bodies,
      availabilityOf,
      sendBuffers,
      plugins: options.plugins,
      ready: async () => {
        const answer = await tableReady();
        // Serving, but live delivery from the other replicas waits on the table until Redis is back.
        const degraded = replicas?.fanout.degraded;
        return answer.ready && degraded ? { ...answer, degraded } : answer;
      },
    });
    const url = await app.start(config.port, config.host);
    replicas?.usage.start(() => app.admission.usageByTenant());
    let stopping: Promise<void> | undefined;
    const stop = () => {
      stopping ??= (async () => {
        // Subscribers are told to come back (WebSocket 1012; SSE ends without `complete`), not
        // that their streams ended; then the feeds end and the listeners stop.
        app.closeStreams();
        feeds.endSubscriptions();
        await app.stop();
        await watcher.stop();
        // Output accepted and not stored yet is stored before the table's clients go.
        await writer.flushAll().catch((err) => log.error('storing waiting output at shutdown failed', err));
        await stores.runs.settled();
        await feeds.stop();
        clients.destroy();
        await engine?.close();
      })();
      return stopping;
    };
    return {
      url,
      app,
      dynamodbEndpoint: engine?.endpoint ?? config.dynamodb.endpoint,
      engine,
      live,
      stores,
      output: writer,
      watcher,
      clients,
      tableCreated,
      open: apiKeys.open,
      stop,
      [Symbol.asyncDispose]: stop,
    };
  } catch (err) {
    await live?.stop();
    clients.destroy();
    await engine?.close();
    throw err;
  }
}
