/**
 * DynamoDB's JSON 1.0 wire protocol: `POST /` with `X-Amz-Target: <Service>.<Operation>`,
 * refused in DynamoDB's order: the request's size, method and content type, a body that is
 * not JSON, an unknown target, a missing, incomplete or (with credentials) wrong signature
 * (over HTTP only: in-process callers are trusted), then an empty body. Before all that, over
 * HTTP, a Host that is not the engine's and a browser without CORS on (callers.ts).
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { crc32 } from 'node:zlib';
import { EngineError, errors } from './errors.ts';
import { unsupported } from './operations.ts';
import { signingRegion } from './region.ts';
import type { RequestContext } from './request-context.ts';
import { signatureProblem } from './signature.ts';
import type { SignedRequest } from './sigv4.ts';

const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
/** How long a browser may keep a preflight's answer (DynamoDB's figure). */
const PREFLIGHT_MAX_AGE_SECONDS = 172_800;
const JSON_TYPES = new Set(['application/json', 'application/x-amz-json-1.0']);

export type Dispatch = (service: string, operation: string, body: Record<string, unknown>, context: RequestContext) => Promise<unknown>;

export interface Answer {
  status: number;
  body: string;
}

export interface ProtocolOptions {
  onUnexpected: (err: unknown) => void;
  isClosing: () => boolean;
  /** The region of requests that do not say theirs (in-process calls, unsigned requests). */
  defaultRegion: string;
  /** Whether the engine serves `service.operation`; any other target is refused before the signature is looked at. */
  serves: (service: string, operation: string) => boolean;
  /** Answer browsers' CORS requests as DynamoDB does (any origin); without it, browsers are refused by `refuseCaller`. */
  cors: boolean;
  /** Why an HTTP request is refused before anything else is looked at (its Host, its Origin), if it is. */
  refuseCaller: (req: IncomingMessage) => EngineError | undefined;
  /** Why a whole signature's value is refused, if it is (absent: any credentials are accepted). */
  checkSignature?: (request: SignedRequest) => EngineError | undefined;
}

export function createProtocol(
  dispatch: Dispatch,
  { onUnexpected, isClosing, defaultRegion, serves, cors, refuseCaller, checkSignature }: ProtocolOptions,
) {
  /**
   * Answers one request: its target and JSON text in, a status and JSON text out; `signature`
   * says what is wrong with an HTTP request's signature, if anything. Never throws.
   */
  async function respond(target: string, text: string, region: string, signature?: () => EngineError | undefined): Promise<Answer> {
    try {
      if (isClosing()) throw errors.internal('The engine is shutting down');
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        throw errors.unreadableBody();
      }
      const [service = '', operation = '', ...extra] = target.split('.');
      if (extra.length > 0 || !operation) throw unsupported('', '');
      if (!serves(service, operation)) throw unsupported(service, operation);
      const refused = signature?.();
      if (refused) throw refused;
      if (body === undefined) throw errors.unreadableBody();
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw errors.serialization('');
      const result = await dispatch(service, operation, body as Record<string, unknown>, { region });
      return { status: 200, body: JSON.stringify(result ?? {}) };
    } catch (err) {
      const known = err instanceof EngineError ? err : undefined;
      if (!known) onUnexpected(err);
      const reply = known ?? errors.internal();
      return { status: reply.statusCode, body: JSON.stringify(reply.toBody()) };
    }
  }

  /** The same in this process, without HTTP (and so without a signature). */
  const answer = (target: string, text: string, region = defaultRegion) => respond(target, text, region);

  /** The same over HTTP. */
  function http(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      if (size > MAX_REQUEST_BYTES) return;
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) return void chunks.push(chunk);
      // Refused as soon as it is too large, without waiting for the rest.
      chunks.length = 0;
      res.statusCode = 413;
      res.setHeader('Transfer-Encoding', 'chunked');
      res.end();
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      if (size > MAX_REQUEST_BYTES) return;
      res.setHeader('x-amzn-RequestId', requestId());
      const refused = refuseCaller(req);
      if (refused) return send(res, refused.statusCode, JSON.stringify(refused.toBody()), 'application/x-amz-json-1.0');
      if (cors && req.headers.origin) {
        res.setHeader('Access-Control-Allow-Origin', '*');
        if (req.method === 'OPTIONS') return preflight(req, res);
      }
      if (req.method === 'GET') return send(res, 200, `healthy: dynamodb.${defaultRegion}.amazonaws.com `, 'text/plain');
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
      if (req.method !== 'POST' || (size > 0 && !JSON_TYPES.has(contentType))) {
        return send(res, 404, '<UnknownOperationException/>\n', 'text/plain');
      }
      // Shutting down: tell the client not to reuse this connection.
      if (isClosing()) res.setHeader('Connection', 'close');
      const replyType = contentType === 'application/x-amz-json-1.0' ? contentType : 'application/json';
      const authorization = req.headers.authorization;
      const region = signingRegion(authorization) ?? defaultRegion;
      const url = req.url ?? '/';
      const queryAt = url.indexOf('?');
      const body = Buffer.concat(chunks);
      const signature = () =>
        signatureProblem({
          authorization,
          query: queryAt >= 0 ? url.slice(queryAt + 1) : undefined,
          hasDate: Boolean(req.headers['x-amz-date'] || req.headers.date),
        }) ?? checkSignature?.({ method: req.method ?? 'POST', url, headers: req.headers, body });
      const target = String(req.headers['x-amz-target'] ?? '');
      void respond(target, body.toString('utf8'), region, signature).then(({ status, body }) => send(res, status, body, replyType));
    });
  }

  return { answer, http };
}

export const requestId = () => randomBytes(39).toString('base64').toUpperCase().replace(/[+/]/g, '0');

/** A browser's preflight: whatever it asks to send is allowed, as DynamoDB allows it. */
function preflight(req: IncomingMessage, res: ServerResponse) {
  const headers = req.headers['access-control-request-headers'];
  const method = req.headers['access-control-request-method'];
  if (headers) res.setHeader('Access-Control-Allow-Headers', headers);
  if (method) res.setHeader('Access-Control-Allow-Methods', method);
  res.setHeader('Access-Control-Max-Age', PREFLIGHT_MAX_AGE_SECONDS);
  res.setHeader('Content-Length', 0);
  res.end();
}

function send(res: ServerResponse, status: number, body: string, contentType: string) {
  if (res.headersSent || res.destroyed) return;
  const bytes = Buffer.from(body, 'utf8');
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', bytes.length);
  res.setHeader('x-amz-crc32', crc32(bytes));
  res.end(bytes);
}
