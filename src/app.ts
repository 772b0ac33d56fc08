/** The HTTP side: graphql-yoga on node:http, GraphiQL included. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { createYoga, maskError as defaultMaskError } from 'graphql-yoga';
import { WebSocketServer } from 'ws';
import type { Context } from './context.ts';
import { ContentionExceeded, InvalidInput } from './domain/errors.ts';

/** What a request is known by when its context is made: an HTTP request, or a WebSocket's connection_init. */
export interface RequestInfo {
  request?: Request;
  connectionParams?: Readonly<Record<string, unknown>>;
}

export interface AppDeps {
  schema: GraphQLSchema;
  /** The context of one operation (the tenant is decided here). */
  context: (info: RequestInfo) => Context | Promise<Context>;
  graphiql: boolean;
  /** Where unexpected errors go in full; clients only see a masked message. */
  logError?: (error: unknown) => void;
}

export interface App {
  readonly server: Server;
  /** Listens; resolves to the /graphql URL. */
  start(port: number, host: string): Promise<string>;
  /** Stops accepting, ends keep-alive connections, and waits for requests in flight. */
  stop(): Promise<void>;
}

/** Errors a client can act on keep their message; anything else is masked and logged. */
function maskError(logError: (error: unknown) => void) {
  return (error: unknown, message: string, isDev?: boolean) => {
    const original = error instanceof GraphQLError ? error.originalError : error;
    if (original instanceof ContentionExceeded) {
      return new GraphQLError(original.message, { extensions: { code: 'CONTENTION', retryable: true } });
    }
    if (original instanceof InvalidInput) return new GraphQLError(original.message, { extensions: { code: 'BAD_USER_INPUT' } });
    // Errors made on purpose for the client (bad input, not found) are not news for the log.
    if (!(original instanceof GraphQLError) && !(error instanceof GraphQLError && !original)) logError(original ?? error);
    return defaultMaskError(error, message, isDev);
  };
}

export function buildApp({ schema, context, graphiql, logError = (e) => console.error('runplane:', e) }: AppDeps): App {
  const yoga = createYoga<object, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    context: (initial) => context(initial as RequestInfo),
    graphiql: graphiql ? { title: 'Runplane' } : false,
    // GraphiQL served from this process, not a CDN: it works offline.
    renderGraphiQL,
    landingPage: false,
    // Never stack traces or DynamoDB internals to clients, whatever NODE_ENV says.
    maskedErrors: { maskError: maskError(logError), isDev: false },
    logging: false,
  });
  const server = createServer(yoga);

  // graphql-ws on the same path, through yoga's envelope: one context, validation and plugin chain.
  const webSockets = new WebSocketServer({ server, path: yoga.graphqlEndpoint });
  const graphqlWs = useServer(
    {
      execute: (args) => (args.rootValue as { execute: typeof import('graphql').execute }).execute(args),
      subscribe: (args) => (args.rootValue as { subscribe: typeof import('graphql').subscribe }).subscribe(args),
      onSubscribe: async (ctx, _id, payload) => {
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params: payload,
          connectionParams: ctx.connectionParams,
        });
        const document = parse(payload.query);
        const errors = validate(schema, document);
        if (errors.length > 0) return errors;
        return {
          schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
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
    async stop() {
      // WebSocket clients are told the server is going away (1001), then HTTP stops.
      await graphqlWs.dispose();
      await new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeIdleConnections();
        // Busy connections (SSE streams included) close once their response ends.
        for (const socket of sockets) socket.once('drain', () => socket.end());
      });
    },
  };
}
