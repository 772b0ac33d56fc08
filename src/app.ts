/** The HTTP side: graphql-yoga on node:http, GraphiQL included. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { GraphQLError, type GraphQLSchema } from 'graphql';
import { createYoga, maskError as defaultMaskError } from 'graphql-yoga';
import type { Context } from './context.ts';
import { ContentionExceeded } from './domain/errors.ts';

export interface AppDeps {
  schema: GraphQLSchema;
  /** The context of one request (the tenant is decided here). */
  context: (request: Request) => Context | Promise<Context>;
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
    if (!(error instanceof GraphQLError) || original) logError(original ?? error);
    return defaultMaskError(error, message, isDev);
  };
}

export function buildApp({ schema, context, graphiql, logError = (e) => console.error('runplane:', e) }: AppDeps): App {
  const yoga = createYoga<object, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    context: ({ request }) => context(request),
    graphiql: graphiql ? { title: 'Runplane' } : false,
    // GraphiQL served from this process, not a CDN: it works offline.
    renderGraphiQL,
    landingPage: false,
    maskedErrors: { maskError: maskError(logError) },
    logging: false,
  });
  const server = createServer(yoga);
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
    stop: () =>
      new Promise((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        server.closeIdleConnections();
        // Busy connections close once their response is sent.
        for (const socket of sockets) socket.once('drain', () => socket.end());
      }),
  };
}
