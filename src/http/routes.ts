/**
 * What node:http does with a request before yoga: probes and /metrics (no key, no yoga: a
 * probe costs nothing), the GraphiQL page, refusals that need no parsing (single connection
 * SSE, a body too large or of unknown length), and the key, checked before the body is read;
 * then room for the body among its tenant's (http/body-shares.ts). Only then does yoga get the request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FairShares } from '../lib/fair-shares.ts';
import type { Logger } from '../lib/logger.ts';
import { codes } from '../schema/error-codes.ts';
import type { ApiKeys } from './api-keys.ts';
import { bearer } from './api-keys.ts';
import { admitBody, BodiesWaiting } from './body-shares.ts';
import type { BrowserPolicy } from './browsers.ts';
import type { ConsoleFiles } from './console.ts';
import type { graphiqlPage } from './graphiql.ts';
import { type NewConnection, refusalOf, served } from './principals.ts';
import type { YogaServer } from './yoga.ts';

export interface RouteDeps {
  yoga: YogaServer;
  apiKeys: ApiKeys;
  newConnection: NewConnection;
  maxBodyBytes: number;
  /** Request bodies being read at once, shared fairly between tenants. */
  bodies: FairShares;
  browsers: BrowserPolicy;
  page?: ReturnType<typeof graphiqlPage>;
  /** The run console at `/`. */
  console?: ConsoleFiles;
  metrics?: () => string;
  ready?: () => Promise<{ ready: boolean; reason?: string; degraded?: string }>;
  log: Logger;
}

/** A request GraphiQL's page is served for (it carries no key: the page asks for one). */
const wantsPage = (req: IncomingMessage) => req.method === 'GET' && /text\/html/.test(req.headers.accept ?? '');

/** Answers at once and reads nothing more from the client: an unread body goes with the connection. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, code: string, message: string, extra: object = {}) {
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
  res.end(JSON.stringify({ errors: [{ message, extensions: { code, ...extra } }] }));
  res.on('finish', () => req.socket.destroySoon());
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** GET /metrics, /health (alive: the process serves), /ready (DynamoDB answers); true when it answered. */
function probe(req: IncomingMessage, res: ServerResponse, path: string | undefined, deps: RouteDeps) {
  if (req.method !== 'GET') return false;
  if (path === '/metrics' && deps.metrics) {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(deps.metrics());
    return true;
  }
  if (path === '/health') {
    json(res, 200, { status: 'alive' });
    return true;
  }
  if (path === '/ready') {
    // A load balancer sends traffic elsewhere while DynamoDB does not answer.
    // Degraded still serves (subscribers are filled from the table), so it stays in rotation.
    void (deps.ready?.() ?? Promise.resolve({ ready: true, reason: undefined, degraded: undefined })).then(({ ready, reason, degraded }) =>
      json(
        res,
        ready ? 200 : 503,
        !ready ? { status: 'unavailable', reason } : degraded ? { status: 'degraded', reason: degraded } : { status: 'ready' },
      ),
    );
    return true;
  }
  return false;
}

/** Requests waiting on one connection behind the one being answered (HTTP/1.1 pipelining) before it is read no more until they are answered. */
export const PIPELINED_BEFORE_PAUSE = 8;
/** ... and past which (all sent in one go, before the pause could take effect) it is cut. */
export const MAX_PIPELINED = 256;

/**
 * One request of a connection at a time: Node hands over pipelined requests at once and holds
 * every answer until those before it are sent, so a client sending many and reading none would
 * have them all made and held. Here the next is handled once the answer before it is sent.
 */
function oneAtATime(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const turns = new WeakMap<object, { busy: boolean; waiting: (() => void)[] }>();
  return (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    let turn = turns.get(socket);
    if (!turn) {
      turn = { busy: false, waiting: [] };
      turns.set(socket, turn);
    }
    const line = turn;
    const next = () => {
      const following = line.waiting.shift();
      if (line.waiting.length < PIPELINED_BEFORE_PAUSE && socket.isPaused()) socket.resume();
      if (following) following();
      else line.busy = false;
    };
    const run = () => {
      line.busy = true;
      res.once('close', next);
      if (socket.destroyed) return res.destroy();
      handle(req, res);
    };
    if (!line.busy) return run();
    if (line.waiting.length >= MAX_PIPELINED) return socket.destroy();
    line.waiting.push(run);
    // Slowed, not cut: what the client sends next waits in its own buffers until these are answered.
    if (line.waiting.length >= PIPELINED_BEFORE_PAUSE) socket.pause();
  };
}

export function requestHandler(deps: RouteDeps) {
  return oneAtATime(handleRequest(deps));
}

function handleRequest(deps: RouteDeps) {
  const { yoga, apiKeys, maxBodyBytes, page } = deps;
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url?.split('?')[0];
    if (probe(req, res, path, deps)) return;
    const refusal = deps.browsers.refusal(req);
    if (refusal) return refuse(req, res, 403, codes.forbidden, refusal);
    for (const [name, value] of Object.entries(deps.browsers.corsHeaders(req) ?? {})) res.setHeader(name, value);
    if (req.method === 'OPTIONS') {
      // A preflight: answered here, before the key is asked for (a browser sends none with it).
      res.writeHead(204, deps.browsers.preflightHeaders(req) ?? {});
      res.end();
      return;
    }
    if (deps.console?.serve(req, res, path)) return;
    if (path === '/graphql' && page && wantsPage(req)) {
      void page.serve(req, res).catch((err) => {
        deps.log.error('serving the GraphiQL page failed', err);
        if (!res.headersSent) res.writeHead(500).end();
      });
      return;
    }
    // graphql-sse's single connection mode (reserve a stream with PUT, then post operations with its token).
    if (path === '/graphql' && (req.method === 'PUT' || req.headers['x-graphql-event-stream-token'] || /[?&]token=/.test(req.url ?? ''))) {
      const why =
        "graphql-sse's single connection mode is not supported: use its distinct connections mode (createClient's default, singleConnection: false), or graphql-ws";
      return refuse(req, res, req.method === 'PUT' ? 405 : 400, codes.badRequest, why);
    }
    // Who asks, before anything of the request is read or parsed: a request without a valid key costs nothing more.
    const key = bearer(req.headers.authorization);
    const principal = apiKeys.authenticate(key);
    if (!principal) return refuse(req, res, 401, codes.unauthenticated, refusalOf(key).message);
    if (Number(req.headers['content-length'] ?? 0) > maxBodyBytes) {
      return refuse(req, res, 413, codes.payloadTooLarge, `The request body is larger than ${maxBodyBytes} bytes`);
    }
    // Without a length the body's size is only known once it is read: ask for one instead.
    if (req.headers['transfer-encoding'] && req.headers['content-length'] === undefined) {
      return refuse(req, res, 411, codes.lengthRequired, 'Send the request body with a Content-Length');
    }
    const connection = deps.newConnection('http', req.socket.remoteAddress ?? '');
    // An SSE client resuming after what it last got (EventSource sends it by itself).
    const lastEventId = req.headers['last-event-id'];
    if (typeof lastEventId === 'string') connection.lastEventId = lastEventId;
    served.set(req, { principal, connection });
    try {
      admitBody(deps.bodies, principal.tenant, req, res, () => void yoga(req, res, { req }));
    } catch (err) {
      if (!(err instanceof BodiesWaiting)) throw err;
      // Nothing of it was read or done: safe to send again. The connection goes with the answer.
      return refuse(req, res, 429, codes.rateLimited, err.message, { retryable: true, retryAfterMs: 250 });
    }
  };
}
