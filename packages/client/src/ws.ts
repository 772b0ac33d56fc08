/**
 * Subscriptions over WebSocket with graphql-ws, one socket for all of a client's streams. Its
 * own retries are off: a resubscription must carry the new resume point, which only the
 * stream knows, so every failure is handed to the stream.
 */
import { type Client, createClient } from 'graphql-ws/client';
import { fromCloseCode, fromGraphQLErrors, fromNetworkFailure, type GraphQLErrorLike, type RunplaneError } from './errors.ts';
import { documentText } from './graphql.ts';
import type { Notice } from './notices.ts';
import { BoundedQueue } from './queue.ts';
import type { StreamRequest, StreamResult, StreamTransport, Subscription } from './transport.ts';

/** A ping this often when quiet, so a dead connection is found out. */
const KEEP_ALIVE_MS = 10_000;
/** A ping unanswered this long closes the socket (the streams then reconnect). */
const PONG_TIMEOUT_MS = 5_000;
/** How long the socket stays open after its last subscription ends, for the next one. */
const LINGER_MS = 1_000;

export interface WebSocketOptions {
  url: string;
  apiKey?: string;
  webSocketImpl?: unknown;
  maxBuffered: number;
  /** Told when the socket opens (acknowledged) and closes. */
  onNotice?: (notice: Notice) => void;
}

export function webSocketTransport({ url, apiKey, webSocketImpl, maxBuffered, onNotice }: WebSocketOptions): StreamTransport {
  const wsUrl = url.replace(/^http/, 'ws');
  let lastId = 0;
  /** Subscriptions the server completed: graphql-ws reports a socket closed with 1000 as a completion too. */
  const completed = new Set<string>();
  const connected = new Set<() => void>();
  let pongTimer: ReturnType<typeof setTimeout> | undefined;
  let open = false;
  const client: Client = createClient({
    url: wsUrl,
    webSocketImpl,
    connectionParams: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    lazy: true,
    retryAttempts: 0,
    lazyCloseTimeout: LINGER_MS,
    keepAlive: KEEP_ALIVE_MS,
    generateID: () => String(++lastId),
    on: {
      connected: () => {
        open = true;
        onNotice?.({ kind: 'socket', state: 'open' });
        for (const listener of connected) listener();
      },
      message: (message) => {
        if (message.type === 'complete') completed.add(message.id);
      },
      ping: (received) => {
        if (received) return;
        pongTimer = setTimeout(() => client.terminate(), PONG_TIMEOUT_MS);
      },
      pong: (received) => {
        if (received) clearTimeout(pongTimer);
      },
      closed: () => {
        clearTimeout(pongTimer);
        // Only a socket that was open is news: one refused at connection_init fails its streams instead.
        if (open) onNotice?.({ kind: 'socket', state: 'closed' });
        open = false;
      },
    },
  });

  return {
    subscribe(request: StreamRequest): Subscription {
      const queue = new BoundedQueue<StreamResult>(maxBuffered, request.policy);
      connected.add(request.onConnected);
      let id = '';
      let stopped = false;
      const stop = () => {
        if (stopped) return;
        stopped = true;
        connected.delete(request.onConnected);
        unsubscribe();
        completed.delete(id);
      };
      const unsubscribe = client.subscribe<Record<string, unknown>>(
        { query: documentText(request.document), variables: request.variables },
        {
          next: (result) => {
            if (stopped) return;
            if (result.errors?.length || !result.data) {
              queue.fail(fromGraphQLErrors((result.errors ?? []) as GraphQLErrorLike[]));
              return stop();
            }
            if (!queue.push({ data: result.data })) stop();
          },
          error: (err) => {
            if (!stopped) queue.fail(toError(err, url));
            stop();
          },
          complete: () => {
            // Completed by the server, or a socket closed that graphql-ws took for a completion.
            if (!stopped) completed.has(id) ? queue.end('complete') : queue.fail(fromCloseCode(1000, 'the socket closed'));
            stop();
          },
        },
      );
      // graphql-ws took its id from generateID while subscribing, just now.
      id = String(lastId);
      const abort = () => {
        queue.end('complete');
        stop();
      };
      request.signal.addEventListener('abort', abort, { once: true });
      if (request.signal.aborted) abort();
      return {
        next: () => queue.next(),
        async return() {
          request.signal.removeEventListener('abort', abort);
          stop();
        },
      };
    },
    execute(document, variables, signal) {
      return new Promise<Record<string, unknown>>((resolve, reject) => {
        let data: Record<string, unknown> | undefined;
        let failed = false;
        const stop = client.subscribe<Record<string, unknown>>(
          { query: documentText(document), variables },
          {
            next: (result) => {
              if (result.errors?.length || !result.data) {
                failed = true;
                reject(fromGraphQLErrors((result.errors ?? []) as GraphQLErrorLike[]));
              } else data = result.data;
            },
            error: (err) => {
              failed = true;
              reject(toError(err, url));
            },
            complete: () => {
              if (failed) return;
              if (data) resolve(data);
              else reject(fromCloseCode(1000, 'the socket closed before the answer'));
            },
          },
        );
        signal?.addEventListener(
          'abort',
          () => {
            stop();
            reject(signal.reason);
          },
          { once: true },
        );
      });
    },
    close: async () => {
      clearTimeout(pongTimer);
      await client.dispose();
    },
  };
}

/** graphql-ws hands over a close event, a list of GraphQL errors, or a socket's error event. */
function toError(err: unknown, url: string): RunplaneError {
  if (Array.isArray(err)) return fromGraphQLErrors(err as GraphQLErrorLike[]);
  const close = err as { code?: unknown; reason?: unknown };
  if (typeof close?.code === 'number') return fromCloseCode(close.code, typeof close.reason === 'string' ? close.reason : '');
  return fromNetworkFailure(err, url);
}
