/** DynamoDB's JSON 1.0 wire protocol: `POST /` with `X-Amz-Target: <Service>.<Operation>`. */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { crc32 } from 'node:zlib';
import { EngineError, errors } from './errors.ts';
import { unsupported } from './operations.ts';
import { signingRegion } from './region.ts';
import type { RequestContext } from './request-context.ts';

const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

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
}

export function createProtocol(dispatch: Dispatch, { onUnexpected, isClosing, defaultRegion }: ProtocolOptions) {
  /** Answers one request: its target and JSON text in, a status and JSON text out. Never throws. */
  async function answer(target: string, text: string, region = defaultRegion): Promise<Answer> {
    try {
      if (isClosing()) throw errors.internal('The engine is shutting down');
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        throw errors.serialization('Start of structure or map found where not expected');
      }
      const [service = '', operation = '', ...extra] = target.split('.');
      if (extra.length > 0 || !operation) throw unsupported('', '');
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

  /** The same over HTTP. */
  function http(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) chunks.push(chunk);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      res.setHeader('x-amzn-RequestId', requestId());
      if (size > MAX_REQUEST_BYTES) return send(res, 413, '');
      if (req.method === 'GET') return send(res, 200, 'healthy: dynamodb.us-east-1.amazonaws.com ', 'text/plain');
      if (req.method !== 'POST') return send(res, 404, '<UnknownOperationException/>\n', 'text/plain');
      // Shutting down: tell the client not to reuse this connection.
      if (isClosing()) res.setHeader('Connection', 'close');
      const contentType = (req.headers['content-type'] ?? 'application/x-amz-json-1.0').split(';')[0]?.trim() ?? '';
      const replyType = contentType === 'application/json' ? 'application/json' : 'application/x-amz-json-1.0';
      const region = signingRegion(req.headers.authorization) ?? defaultRegion;
      void answer(String(req.headers['x-amz-target'] ?? ''), Buffer.concat(chunks).toString('utf8'), region).then(({ status, body }) =>
        send(res, status, body, replyType),
      );
    });
  }

  return { answer, http };
}

export const requestId = () => randomBytes(39).toString('base64').toUpperCase().replace(/[+/]/g, '0');

function send(res: ServerResponse, status: number, body: string, contentType = 'application/x-amz-json-1.0') {
  if (res.headersSent || res.destroyed) return;
  const bytes = Buffer.from(body, 'utf8');
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', bytes.length);
  res.setHeader('x-amz-crc32', crc32(bytes));
  res.end(bytes);
}
