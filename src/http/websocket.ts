/**
 * graphql-ws on /graphql, through yoga's envelope (one context, the same limits and plugins
 * as HTTP). A socket's key is checked at connection_init and again for every operation;
 * subscriptions are admitted against the socket's and the tenant's caps and rate before the
 * document is parsed where possible; revoking the key closes the socket.
 */
import type { Server } from 'node:http';
import { type ExecutionResult, GraphQLError } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Limits } from '../domain/limits.ts';
import type { Logger } from '../lib/logger.ts';
import { codes } from '../schema/error-codes.ts';
import type { BrowserPolicy } from './browsers.ts';
import type { ConnectionLimits } from './connections.ts';
import { type Mask, withoutHttpStatus } from './errors.ts';
import { type NewConnection, socketKey } from './principals.ts';
import { reusedIdsWaitForTheirEnd } from './reused-ids.ts';
import type { Sessions } from './sessions.ts';
import { keepSocketsHonest, leavesTooMuchUnread } from './socket-liveness.ts';
import { type EnvelopedRoot, type OperationDeps, operationAdmission } from './socket-operations.ts';
import { type Extra, type SocketSession, socketSessions } from './socket-sessions.ts';
import { deliverOverSocket, ownResults } from './subscriptions/index.ts';

/** Queries and mutations of one socket executing at once (over HTTP a connection runs one); one more is refused. */
export const MAX_OPERATIONS_IN_FLIGHT = 16;

export interface WebSocketDeps extends OperationDeps {
  sessions: Sessions;
  mask: Mask;
  newConnection: NewConnection;
  connections: ConnectionLimits;
  maxBodyBytes: number;
  limits: Limits;
  log: Logger;
  browsers: BrowserPolicy;
  /** envelop plugins after the server's own. */
  plugins?: readonly unknown[];
}

const tooManyAtOnce = () => ({
  errors: [
    new GraphQLError(`At most ${MAX_OPERATIONS_IN_FLIGHT} queries and mutations run at once on one connection: wait for an answer`, {
      extensions: { code: codes.limitExceeded },
    }),
  ],
});

const isStream = (result: unknown): result is AsyncIterable<ExecutionResult> =>
  typeof result === 'object' && result !== null && Symbol.asyncIterator in result;

/** A query's or mutation's answer with its errors as subscription frames have them (undefined: as it is). */
const answerWithoutHttpStatus = <R>(result: R): R | undefined => {
  const errors = (result as ExecutionResult | undefined)?.errors;
  if (isStream(result) || !errors?.some((e) => e instanceof GraphQLError && e.extensions && 'http' in e.extensions)) return undefined;
  return { ...(result as ExecutionResult), errors: errors.map((e) => (e instanceof GraphQLError ? withoutHttpStatus(e) : e)) } as R;
};

/**
 * A frame whose socket is cut before it was written fails its send's callback, and graphql-ws
 * takes that for a fault of ours: "Internal error occurred during message handling" with a
 * stack on stderr, once per answer in flight, so a client could fill the server's log by asking
 * and hanging up. A send to a socket no longer open has nobody to reach: its callback is told
 * it is done. (The prototype's send is looked up at each call, so faults injected there apply.)
 */
const NO_SEND_OPTIONS = Object.freeze({});

export function quietWhenCut(socket: WebSocket) {
  socket.send = ((data: unknown, optionsOrDone?: unknown, done?: (err?: Error) => void) => {
    const callback = typeof optionsOrDone === 'function' ? (optionsOrDone as (err?: Error) => void) : done;
    const options = typeof optionsOrDone === 'function' || optionsOrDone === undefined ? NO_SEND_OPTIONS : optionsOrDone;
    const send = (Object.getPrototypeOf(socket) as WebSocket).send;
    if (!callback) return send.call(socket, data as never, options as never);
    return send.call(socket, data as never, options as never, (err?: Error) =>
      callback(err && socket.readyState !== socket.OPEN ? undefined : err),
    );
  }) as WebSocket['send'];
}

export function attachWebSockets(server: Server, deps: WebSocketDeps) {
  const { yoga, apiKeys, admission, sessions } = deps;
  // A client may leave its send buffer's worth of frames and one whole answer unread. What it
  // asks for beyond that waits until it has taken them (a client reading slowly is slowed, not
  // cut); one that goes on asking without reading is cut (as a peer that is gone: 1006).
  const maxUnsentBytes = deps.connections.sendBufferBytes + deps.limits.maxResponseBytes;
  const perSocket = socketSessions(maxUnsentBytes);
  const admit = operationAdmission(deps, perSocket);
  // Upgrades are handed over by hand: a WebSocketServer given the HTTP server would also take
  // its errors (a port in use), which graphql-ws then prints as its own internal error.
  // No compression: socket-frames.ts writes its frames beside ws's, which it may do only while ws
  // writes each of its own at once (a compressing ws queues them).
  const webSockets = new WebSocketServer({ noServer: true, maxPayload: deps.maxBodyBytes, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    if (req.url?.split('?')[0] !== yoga.graphqlEndpoint) {
      socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    // A page on another site may open a WebSocket to any address (no preflight): refused by origin like HTTP.
    const refusal = deps.browsers.refusal(req);
    if (refusal) {
      const body = Buffer.from(JSON.stringify({ errors: [{ message: refusal, extensions: { code: codes.forbidden } }] }));
      socket.end(
        `HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
      return;
    }
    webSockets.handleUpgrade(req, socket, head, (ws) => {
      quietWhenCut(ws);
      webSockets.emit('connection', ws, req);
      reusedIdsWaitForTheirEnd(ws, { maxHeldBytes: deps.maxBodyBytes });
    });
  });

  const graphqlWs = useServer<Record<string, unknown>, Extra>(
    {
      connectionInitWaitTimeout: deps.connections.connectionInitTimeoutMs,
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
        const address = ctx.extra.request.socket.remoteAddress ?? '';
        const session: SocketSession = {
          connection: deps.newConnection('ws', address),
          slot: admission.slot(),
          places: new Map(),
          executing: 0,
          waiting: 0,
        };
        perSocket.set(socket, session);
        socket.once('close', () => {
          connected();
          forget();
          for (const id of [...session.places.keys()]) perSocket.giveBack(socket, id);
        });
        return true;
      },
      // Counted as they run (not by the client's ids, which it may use again once completed).
      execute: async (args) => {
        const root = args.rootValue as EnvelopedRoot;
        if (root.session.executing >= MAX_OPERATIONS_IN_FLIGHT) return tooManyAtOnce();
        root.session.executing++;
        try {
          return await root.execute(args);
        } finally {
          root.session.executing--;
        }
      },
      subscribe: (args) => (args.rootValue as EnvelopedRoot).subscribe(args),
      // A subscription's results are written by socket-frames.ts (one serialization for every
      // subscriber sharing a result); graphql-ws keeps the operation through the handle it returns.
      onOperation: (ctx, id, _payload, args, result) => {
        const socket = ctx.extra.socket;
        const session = perSocket.get(socket);
        const release = session?.places.get(id);
        if (!session || !release || !isStream(result)) {
          perSocket.giveBack(socket, id);
          return answerWithoutHttpStatus(result);
        }
        session.places.delete(id);
        return deliverOverSocket(result, {
          socket,
          raw: ctx.extra.request.socket,
          id,
          mask: deps.mask,
          sendBuffer: session.connection.sendBuffer,
          release,
          // Plugins of the server's user may have per-result hooks: then every result passes them.
          own: deps.plugins?.length ? undefined : ownResults(args.contextValue),
        });
      },
      onComplete: (ctx, id) => perSocket.giveBack(ctx.extra.socket, id),
      onError: (ctx, id) => perSocket.giveBack(ctx.extra.socket, id),
      // A ping is answered with its payload: once the client has taken what it was sent.
      onPing: async (ctx) => {
        const session = perSocket.get(ctx.extra.socket);
        if (session) await perSocket.untilRoom(ctx.extra.socket, ctx.extra.request.socket, session);
        // Before connection_init nobody is known to wait for: past a send buffer unread, it is cut.
        else if (leavesTooMuchUnread(ctx.extra.socket, deps.connections.sendBufferBytes)) ctx.extra.socket.terminate();
      },
      onSubscribe: async (ctx, id, payload) => {
        const refused = await admit(ctx, id, payload);
        // Refusals as over HTTP's body: without the HTTP status yoga keeps in their extensions.
        return Array.isArray(refused) ? refused.map((e) => (e instanceof GraphQLError ? withoutHttpStatus(e) : e)) : refused;
      },
    },
    webSockets,
    // No keepalive of graphql-ws's own: it takes any pong as an answer (socket-liveness.ts).
    0,
  );

  const stopPinging = keepSocketsHonest(webSockets, deps.connections.pingIntervalMs, maxUnsentBytes);
  // graphql-ws prints every socket error to the console, stack and all. A client's protocol
  // error (a message over the size limit, invalid UTF-8, a bad frame) is the client's: ws has
  // closed the socket already with the code that says so (1009, 1007, 1002), and a client
  // sending them in a loop would flood the log. Anything else goes to the logger.
  webSockets.on('connection', (socket: WebSocket) => {
    socket.removeAllListeners('error');
    socket.on('error', (err: Error & { code?: unknown }) => {
      if (typeof err.code === 'string' && err.code.startsWith('WS_ERR_')) return;
      deps.log.error('a WebSocket failed', err);
      socket.close(1011, 'Internal server error');
    });
  });

  return {
    /**
     * Closes every socket with 1012 (service restart): stock graphql-ws clients reconnect, and
     * an operation cut this way gets no `complete`, so a client resuming from its last seq loses nothing.
     */
    closeAll() {
      for (const socket of webSockets.clients) socket.close(1012, 'The server is restarting: reconnect and resume from your last seq');
    },
    dispose: () => {
      stopPinging();
      return graphqlWs.dispose();
    },
  };
}
