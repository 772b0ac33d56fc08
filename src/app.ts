/** The HTTP side: graphql-yoga on node:http (GraphiQL, SSE) and graphql-ws on the same path. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { type execute, GraphQLError, type GraphQLSchema } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { createYoga } from 'graphql-yoga';
import { type WebSocket, WebSocketServer } from 'ws';
import { type ApiKeys, bearer, type Principal } from './auth.ts';
import { maskError } from './client-errors.ts';
import type { Context } from './context.ts';
import { guards } from './guards.ts';
import { sharedDelivery } from './shared-delivery.ts';
import { subscribeOverSocket } from './ws-delivery.ts';

export interface AppDeps {
  schema: GraphQLSchema;
  apiKeys: ApiKeys;
  /** The context of one operation, for the principal its key belongs to. */
  context: (principal: Principal) => Context;
  graphiql: boolean;
  introspection: boolean;
  fieldSuggestions: boolean;
  /** Largest request body (and WebSocket message) accepted. */
  maxBodyBytes: number;
  /** Where unexpected errors go in full; clients only see a masked message. */
  logError?: (error: unknown) => void;
  /** The text served at GET /metrics (Prometheus format); absent: no /metrics. */
  metrics?: () => string;
  /** GET /ready: whether DynamoDB answers now (absent: always ready). */
  ready?: () => Promise<{ ready: boolean; reason?: string }>;
}

export interface App {
  readonly server: Server;
  /** Listens; resolves to the /graphql URL. */
  start(port: number, host: string): Promise<string>;
  /** Tells WebSocket clients it is going away, stops accepting, and waits (up to `graceMs`) for requests in flight. */
  stop(graceMs?: number): Promise<void>;
}

const unauthenticated = (message: string) => new GraphQLError(message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });

/** The key of a WebSocket connection: connectionParams.authorization ("Bearer <key>") or .apiKey. */
function socketKey(params: Readonly<Record<string, unknown>> | undefined) {
  return bearer(params?.authorization ?? params?.Authorization) ?? (typeof params?.apiKey === 'string' ? params.apiKey : undefined);
}

export function buildApp(deps: AppDeps): App {
  const { schema, apiKeys, context, maxBodyBytes, logError = (e) => console.error('runplane:', e) } = deps;

  /** Who is asking: from the HTTP Authorization header, or the WebSocket's connectionParams. */
  const principalOf = (initial: { request?: Request; connectionParams?: Readonly<Record<string, unknown>> }) => {
    const key = initial.connectionParams ? socketKey(initial.connectionParams) : bearer(initial.request?.headers.get('authorization'));
    const principal = apiKeys.authenticate(key);
    if (!principal)
      throw unauthenticated(key ? 'This API key is not valid (unknown or revoked)' : 'An API key is required: Authorization: Bearer <key>');
    return principal;
  };

  const mask = maskError(logError);
  const yoga = createYoga<object, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    context: (initial) => context(principalOf(initial as never)),
    graphiql: deps.graphiql ? { title: 'Runplane' } : false,
    // GraphiQL served from this process, not a CDN: it works offline.
    renderGraphiQL,
    landingPage: false,
    // Never stack traces or DynamoDB internals to clients, whatever NODE_ENV says.
    maskedErrors: { maskError: mask, isDev: false },
    // One operation per request: a batch would multiply every limit below.
    batching: false,
    plugins: [...guards({ introspection: deps.introspection, fieldSuggestions: deps.fieldSuggestions }), sharedDelivery],
    logging: false,
  });

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const refuse = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
      res.end(JSON.stringify({ errors: [{ message, extensions: { code: status === 413 ? 'PAYLOAD_TOO_LARGE' : 'LENGTH_REQUIRED' } }] }));
      req.resume();
    };
    if (Number(req.headers['content-length'] ?? 0) > maxBodyBytes)
      return refuse(413, `The request body is larger than ${maxBodyBytes} bytes`);
    // Without a length the body's size is only known once it is read: ask for one instead.
    if (req.headers['transfer-encoding'] && req.headers['content-length'] === undefined) {
      return refuse(411, 'Send the request body with a Content-Length');
    }
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
    void yoga(req, res);
  });

  // graphql-ws on the same path, through yoga's envelope: one context, the same limits and plugins.
  const webSockets = new WebSocketServer({ server, path: yoga.graphqlEndpoint, maxPayload: maxBodyBytes });
  const graphqlWs = useServer(
    {
      // A bad or missing key closes the socket with 4403 Forbidden at connection_init.
      onConnect: (ctx) => apiKeys.authenticate(socketKey(ctx.connectionParams)) !== undefined,
      execute: (args) => (args.rootValue as { execute: typeof execute }).execute(args),
      subscribe: (args) => {
        const { socket, id } = args.rootValue as { socket: WebSocket; id: string };
        return subscribeOverSocket(args, socket, id, mask);
      },
      onSubscribe: async (ctx, id, payload) => {
        const enveloped = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params: payload,
          connectionParams: ctx.connectionParams ?? {},
        });
        // Limits throw from parse and validate (as over HTTP): answer them as this operation's errors.
        let document: ReturnType<typeof enveloped.parse>;
        try {
          document = enveloped.parse(payload.query);
          const errors = enveloped.validate(enveloped.schema, document);
          if (errors.length > 0) return errors;
        } catch (err) {
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        let contextValue: Context;
        try {
          // The key is checked again for each operation: a key revoked since connecting stops here.
          contextValue = (await enveloped.contextFactory()) as Context;
        } catch (err) {
          if (err instanceof GraphQLError) return [err];
          throw err;
        }
        return {
          schema: enveloped.schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue,
          rootValue: { execute: enveloped.execute, socket: ctx.extra.socket, id },
        };
      },
    },
    webSockets,
  );

  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  return {
    server,
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
    async stop(graceMs = 5_000) {
      // WebSocket clients are told the server is going away (1001), then HTTP stops accepting.
      await graphqlWs.dispose();
      await new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeIdleConnections();
        // Requests in flight get `graceMs` to finish; whatever still holds a socket then is cut.
        const deadline = setTimeout(() => {
          for (const socket of sockets) socket.destroy();
        }, graceMs);
        deadline.unref();
        server.once('close', () => clearTimeout(deadline));
      });
    },
  };
}
