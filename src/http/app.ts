/** The HTTP side: graphql-yoga on node:http (GraphiQL, SSE) and graphql-ws on the same path. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ExecutionArgs, type execute, GraphQLError, type GraphQLSchema, getOperationAST } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { createYoga } from 'graphql-yoga';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Limits } from '../domain/limits.ts';
import type { Principal } from '../domain/principal.ts';
import type { Logger } from '../lib/logger.ts';
import type { Connection, Context } from '../schema/context.ts';
import { codes } from '../schema/error-codes.ts';
import { SendBudget } from '../streams/send-budget.ts';
import { type Admission, type ConnectionSlot, createAdmission, type Release } from './admission.ts';
import { type ApiKeys, bearer } from './api-keys.ts';
import type { ConnectionLimits } from './connections.ts';
import { guardConnections } from './connections.ts';
import { type CostRules, checkCost } from './cost.ts';
import { type AvailabilityOf, maskError } from './errors.ts';
import { graphiqlPage } from './graphiql.ts';
import { guards } from './guards.ts';
import { createSessions } from './sessions.ts';
import { sharedDelivery } from './shared-execution.ts';
import { subscribeOverSocket } from './socket-delivery.ts';
import { sseDelivery } from './sse.ts';

export interface AppDeps {
  schema: GraphQLSchema;
  apiKeys: ApiKeys;
  /** The context of one operation, for the principal its key belongs to, on the connection it came on. */
  context: (principal: Principal, connection: Connection) => Context;
  graphiql: boolean;
  introspection: boolean;
  /** Tell clients the nearest name when they misspell one (off in production: it reveals the schema). */
  suggestions: boolean;
  /** Largest request body (and WebSocket message) accepted. */
  maxBodyBytes: number;
  limits: Limits;
  connections: ConnectionLimits;
  /** Where unexpected errors go in full (clients only see a masked message). */
  log: Logger;
  /** The text served at GET /metrics (Prometheus format); absent: no /metrics. */
  metrics?: () => string;
  /** GET /ready: whether DynamoDB answers now (absent: always ready). */
  ready?: () => Promise<{ ready: boolean; reason?: string }>;
  /** Where every connection's send budget adds what it holds (for /metrics). */
  sendBuffers?: { held: number };
  /** Which DynamoDB failures are worth retrying (the client is told so). */
  availabilityOf: AvailabilityOf;
}

export interface App {
  readonly server: Server;
  readonly admission: Admission;
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

/** Longest subscription id (graphql-ws echoes it in every frame) and operation name accepted. */
const MAX_ID_LENGTH = 128;
const MAX_OPERATION_NAME_LENGTH = 256;
/** A document that may hold a subscription (every subscription operation is spelled with this word). */
const SUBSCRIPTION_KEYWORD = /\bsubscription\b/;

const unauthenticated = (message: string) =>
  new GraphQLError(message, { extensions: { code: codes.unauthenticated, http: { status: 401 } } });

/** The key of a WebSocket connection: connectionParams.authorization ("Bearer <key>") or .apiKey. */
function socketKey(params: Readonly<Record<string, unknown>> | undefined) {
  return bearer(params?.authorization ?? params?.Authorization) ?? (typeof params?.apiKey === 'string' ? params.apiKey : undefined);
}

const refusalOf = (key: string | undefined) =>
  unauthenticated(key ? 'This API key is not valid (unknown or revoked)' : 'An API key is required: Authorization: Bearer <key>');

/** A request GraphiQL's page is served for (it carries no key: the page asks for one). */
const wantsPage = (req: IncomingMessage) => req.method === 'GET' && /text\/html/.test(req.headers.accept ?? '');

/** Node request -> what yoga's context needs: who asks, on which connection. */
interface Served {
  principal: Principal;
  connection: Connection;
}
const served = new WeakMap<IncomingMessage, Served>();

export function buildApp(deps: AppDeps): App {
  const { schema, apiKeys, context, maxBodyBytes, limits, connections, log } = deps;
  const logError = (err: unknown) => log.error('unexpected error', err);
  const admission = createAdmission(connections);
  const sessions = createSessions();
  const cost: CostRules = {
    maxCost: limits.maxQueryCost,
    maxPageSize: limits.maxPageSize,
    defaultPageSize: 50,
    weights: { 'Event.payload': Math.ceil(limits.maxPayloadBytes / 1024) },
  };
  const mask = maskError(logError, deps.availabilityOf);
  const newConnection = (transport: Connection['transport'], address: string): Connection => ({
    transport,
    address,
    budget: new SendBudget(connections.sendBufferBytes, deps.sendBuffers),
  });

  /** Subscriptions over SSE: admitted per tenant and per address, revocable, given back when they end. */
  const sseAdmission = {
    onSubscribe({ args, setResultAndStopExecution }: { args: ExecutionArgs; setResultAndStopExecution: (r: never) => void }) {
      const { tenant, keyId, connection } = args.contextValue as Context;
      // Over WebSocket, subscriptions are admitted (and given back) with their socket.
      if (connection.transport !== 'http') return;
      const tooFast = admission.setup({ address: connection.address });
      if (tooFast) return setResultAndStopExecution({ errors: [tooFast] } as never);
      const connected = admission.connect(tenant);
      if (connected instanceof GraphQLError) return setResultAndStopExecution({ errors: [connected] } as never);
      const subscribed = admission.subscribe(tenant);
      if (subscribed instanceof GraphQLError) {
        connected();
        return setResultAndStopExecution({ errors: [subscribed] } as never);
      }
      const release = () => {
        connected();
        subscribed();
      };
      return {
        onSubscribeResult({ result, setResult }: { result: unknown; setResult: (r: never) => void }) {
          if (!(Symbol.asyncIterator in (result as object))) return release();
          setResult(revocable(result as AsyncIterableIterator<unknown>, keyId, release) as never);
        },
      };
    },
  };

  /** Ends a stream when its key is revoked (the client gets UNAUTHENTICATED), and gives its place back however it ends. */
  function revocable<T>(source: AsyncIterableIterator<T>, keyId: string, release: Release): AsyncIterableIterator<T> {
    let revoked: ((err: unknown) => void) | undefined;
    const ended = new Promise<never>((_, reject) => {
      revoked = reject;
    });
    ended.catch(() => undefined);
    const forget = sessions.track(keyId, () => {
      revoked?.(unauthenticated('This API key was revoked'));
      void source.return?.();
    });
    const finish = () => {
      forget();
      release();
    };
    return {
      async next() {
        try {
          const item = await Promise.race([source.next(), ended]);
          if (item.done) finish();
          return item;
        } catch (err) {
          finish();
          throw err;
        }
      },
      async return() {
        finish();
        await source.return?.();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  const yoga = createYoga<{ req: IncomingMessage }, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    // HTTP: who asked was settled before yoga saw the request; WebSocket: onSubscribe hands it in.
    context: (initial) => {
      const given = initial as Partial<Served> & { req?: IncomingMessage };
      const known = given.principal && given.connection ? (given as Served) : given.req && served.get(given.req);
      if (!known) throw unauthenticated('An API key is required: Authorization: Bearer <key>');
      return context(known.principal, known.connection);
    },
    // GraphiQL is served before yoga sees the request (compressed, cached: http/graphiql.ts).
    graphiql: false,
    landingPage: false,
    // Never stack traces or DynamoDB internals to clients, whatever NODE_ENV says.
    maskedErrors: { maskError: mask, isDev: false },
    // One operation per request: a batch would multiply every limit below.
    batching: false,
    plugins: [
      ...guards({ introspection: deps.introspection, suggestions: deps.suggestions, cost }),
      sseAdmission as never,
      sharedDelivery,
      sseDelivery(mask, () => stopping),
    ],
    logging: false,
  });

  const page = deps.graphiql ? graphiqlPage({ endpoint: '/graphql' }) : undefined;
  /** Set once a graceful stop began: streams then end without `complete` (clients come back). */
  let stopping = false;

  const server = createServer({ connectionsCheckingInterval: 1_000 }, (req: IncomingMessage, res: ServerResponse) => {
    const refuse = (status: number, code: string, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify({ errors: [{ message, extensions: { code } }] }));
      // Nothing more is read from this client: an unread body is dropped with the connection.
      res.on('finish', () => req.socket.destroySoon());
    };
    const path = req.url?.split('?')[0];
    if (req.method === 'GET' && path === '/metrics' && deps.metrics) {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(deps.metrics());
      return;
    }
    // Alive: the process serves requests (whatever DynamoDB does).
    if (req.method === 'GET' && path === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"alive"}');
      return;
    }
    // Ready: DynamoDB answers, so requests can succeed (a load balancer sends traffic elsewhere meanwhile).
    if (req.method === 'GET' && path === '/ready') {
      void (deps.ready?.() ?? Promise.resolve<{ ready: boolean; reason?: string }>({ ready: true })).then(({ ready, reason }) => {
        res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify(ready ? { status: 'ready' } : { status: 'unavailable', reason }));
      });
      return;
    }
    if (path === '/graphql' && page && wantsPage(req)) {
      void page.serve(req, res).catch((err) => {
        logError(err);
        if (!res.headersSent) res.writeHead(500).end();
      });
      return;
    }
    // graphql-sse's single connection mode (reserve a stream with PUT, then post operations with its token).
    if (path === '/graphql' && (req.method === 'PUT' || req.headers['x-graphql-event-stream-token'] || /[?&]token=/.test(req.url ?? ''))) {
      return refuse(
        req.method === 'PUT' ? 405 : 400,
        codes.badRequest,
        "graphql-sse's single connection mode is not supported: use its distinct connections mode (createClient's default, singleConnection: false), or graphql-ws",
      );
    }
    // Who asks, before anything of the request is read or parsed: a request without a valid key costs nothing more.
    const key = bearer(req.headers.authorization);
    const principal = apiKeys.authenticate(key);
    if (!principal) return refuse(401, codes.unauthenticated, refusalOf(key).message);
    if (Number(req.headers['content-length'] ?? 0) > maxBodyBytes) {
      return refuse(413, codes.payloadTooLarge, `The request body is larger than ${maxBodyBytes} bytes`);
    }
    // Without a length the body's size is only known once it is read: ask for one instead.
    if (req.headers['transfer-encoding'] && req.headers['content-length'] === undefined) {
      return refuse(411, codes.lengthRequired, 'Send the request body with a Content-Length');
    }
    const connection = newConnection('http', req.socket.remoteAddress ?? '');
    // An SSE client resuming after what it last got (EventSource sends it by itself).
    const lastEventId = req.headers['last-event-id'];
    if (typeof lastEventId === 'string') connection.lastEventId = lastEventId;
    served.set(req, { principal, connection });
    void yoga(req, res, { req });
  });
  const guarded = guardConnections(server, connections);
  const stopWatching = apiKeys.watch((keyIds) => sessions.revoke(keyIds));

  /** What a WebSocket holds once its key is accepted. */
  interface SocketSession {
    connection: Connection;
    slot: ConnectionSlot;
  }
  const socketSessions = new WeakMap<WebSocket, SocketSession>();

  // graphql-ws on the same path, through yoga's envelope: one context, the same limits and plugins.
  // Upgrades are handed over by hand: a WebSocketServer given the HTTP server would also take
  // its errors (a port in use), which graphql-ws then prints as its own internal error.
  const webSockets = new WebSocketServer({ noServer: true, maxPayload: maxBodyBytes });
  server.on('upgrade', (req, socket, head) => {
    if (req.url?.split('?')[0] !== yoga.graphqlEndpoint) {
      socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    webSockets.handleUpgrade(req, socket, head, (ws) => webSockets.emit('connection', ws, req));
  });
  const graphqlWs = useServer(
    {
      connectionInitWaitTimeout: connections.connectionInitTimeoutMs,
      onConnect: (ctx) => {
        const socket = ctx.extra.socket;
        // A bad or missing key closes the socket with 4403 Forbidden at connection_init.
        const principal = apiKeys.authenticate(socketKey(ctx.connectionParams));
        if (!principal) return false;
        const connected = admission.connect(principal.tenant);
        if (connected instanceof GraphQLError) {
          socket.close(4429, connected.message.slice(0, 120));
          return false;
        }
        const forget = sessions.track(principal.keyId, () => socket.close(4403, 'This API key was revoked'));
        socket.once('close', () => {
          connected();
          forget();
        });
        const address = ctx.extra.request.socket.remoteAddress ?? '';
        socketSessions.set(socket, { connection: newConnection('ws', address), slot: admission.slot() });
        return true;
      },
      execute: (args) => (args.rootValue as { execute: typeof execute }).execute(args),
      subscribe: (args) => {
        const root = args.rootValue as { socket: WebSocket; id: string; budget: SendBudget; release: Release };
        return subscribeOverSocket(args, { ...root, mask });
      },
      onSubscribe: async (ctx, id, payload) => {
        const socket = ctx.extra.socket;
        if (id.length > MAX_ID_LENGTH) {
          const refusal = `Subscription ids are at most ${MAX_ID_LENGTH} characters`;
          socket.close(4400, refusal);
          return [new GraphQLError(refusal, { extensions: { code: codes.badRequest } })];
        }
        if ((payload.operationName?.length ?? 0) > MAX_OPERATION_NAME_LENGTH) {
          return [
            new GraphQLError(`Operation names are at most ${MAX_OPERATION_NAME_LENGTH} characters`, {
              extensions: { code: codes.badRequest },
            }),
          ];
        }
        const session = socketSessions.get(socket);
        if (!session) return [unauthenticated('Send connection_init with an API key first')];
        // The setup rate is taken before parsing: a flood of subscribes costs a token check each.
        if (SUBSCRIPTION_KEYWORD.test(payload.query)) {
          const tooFast = admission.setup({ slot: session.slot });
          if (tooFast) return [tooFast];
        }
        const enveloped = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket,
          params: payload,
          connectionParams: ctx.connectionParams ?? {},
        });
        // Limits throw from parse and validate (as over HTTP): answer them as this operation's errors.
        let document: ReturnType<typeof enveloped.parse>;
        try {
          document = enveloped.parse(payload.query);
          const errors = enveloped.validate(enveloped.schema, document);
          if (errors.length > 0) return errors;
          checkCost(enveloped.schema, document, payload.operationName, payload.variables, cost);
        } catch (err) {
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        // The key is checked again for each operation: a key revoked since connecting stops here.
        const principal = apiKeys.authenticate(socketKey(ctx.connectionParams));
        if (!principal) return [refusalOf(socketKey(ctx.connectionParams))];
        let release: Release = () => {};
        if (getOperationAST(document, payload.operationName)?.operation === 'subscription') {
          const admitted = admission.subscribe(principal.tenant, session.slot);
          if (admitted instanceof GraphQLError) return [admitted];
          release = admitted;
        }
        let contextValue: Context;
        try {
          contextValue = (await enveloped.contextFactory({ principal, connection: session.connection } satisfies Served)) as Context;
        } catch (err) {
          release();
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        return {
          schema: enveloped.schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue,
          rootValue: { execute: enveloped.execute, socket, id, budget: session.connection.budget, release },
        };
      },
    },
    webSockets,
  );

  return {
    server,
    admission,
    start: (port, host) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          const address = server.address() as AddressInfo;
          const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          resolve(`http://${shown}:${address.port}/graphql`);
        });
      }),
    closeStreams() {
      stopping = true;
      // 1012 (service restart): stock graphql-ws clients reconnect; an operation cut this way
      // gets no `complete`, so a client that resumes from its last seq loses nothing.
      for (const socket of webSockets.clients) socket.close(1012, 'The server is restarting: reconnect and resume from your last seq');
    },
    async stop(graceMs = 5_000) {
      stopWatching[Symbol.dispose]();
      this.closeStreams();
      await graphqlWs.dispose();
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
    },
  };
}
