/**
 * A SigV4 signature's value, checked against the engine's credentials once signature.ts found
 * it whole, in DynamoDB's order and wording: the date and the clock skew, Host among the signed
 * headers, the algorithm, the credential's scope, the key id, then the signature over the
 * canonical request (method, path, query, the signed headers and the body's hash). Any region
 * in the scope is taken: the engine answers in the region a request was signed for.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { EngineError } from './errors.ts';

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface SignedRequest {
  method: string;
  /** The request's target as sent: its path and query. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** How far a signature's date may be from the engine's clock (DynamoDB's figure). */
const SKEW_MS = 15 * 60_000;
const ALGORITHM = 'AWS4-HMAC-SHA256';
const SERVICE = 'dynamodb';
const TERMINATOR = 'aws4_request';
const coral = 'com.amazon.coral.service#';

const invalid = (message: string) => new EngineError(400, `${coral}InvalidSignatureException`, message);
const incomplete = (message: string) => new EngineError(400, `${coral}IncompleteSignatureException`, message);

/** 20260101T000000Z for a time in milliseconds. */
const basic = (ms: number) => new Date(ms).toISOString().replace(/[-:]|\.\d{3}/g, '');

interface Parts {
  algorithm: string;
  credential: string;
  signedHeaders: string[];
  signature: string;
  date: string;
  /** Presigned: how long the signature holds, in seconds (X-Amz-Expires). */
  expiresSeconds?: number;
}

function partsOf({ url, headers }: SignedRequest): Parts {
  const authorization = headers.authorization;
  if (authorization) {
    const [algorithm = '', ...rest] = authorization.trim().split(/,| /).filter(Boolean);
    const given = new Map(rest.map((part) => [part.slice(0, part.indexOf('=')), part.slice(part.indexOf('=') + 1)]));
    return {
      algorithm,
      credential: given.get('Credential') ?? '',
      signedHeaders: (given.get('SignedHeaders') ?? '').toLowerCase().split(';'),
      signature: given.get('Signature') ?? '',
      date: String(headers['x-amz-date'] ?? headers.date ?? ''),
    };
  }
  const params = new URLSearchParams(url.slice(url.indexOf('?') + 1));
  const expires = params.get('X-Amz-Expires');
  return {
    algorithm: params.get('X-Amz-Algorithm') ?? '',
    credential: params.get('X-Amz-Credential') ?? '',
    signedHeaders: (params.get('X-Amz-SignedHeaders') ?? '').toLowerCase().split(';'),
    signature: params.get('X-Amz-Signature') ?? '',
    date: params.get('X-Amz-Date') ?? '',
    expiresSeconds: expires && /^\d+$/.test(expires) ? Number(expires) : undefined,
  };
}

/** Why the signature of a request (whole, as signature.ts checks) is refused, if it is. */
export function signatureMismatch(request: SignedRequest, credentials: Credentials, now: number): EngineError | undefined {
  const parts = partsOf(request);
  const { date } = parts;
  const when = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!when) return incomplete(`Date must be in ISO-8601 'basic format'. Got '${date}'. See http://en.wikipedia.org/wiki/ISO_8601`);
  const [y, mo, d, h, mi, s] = when.slice(1).map(Number) as [number, number, number, number, number, number];
  const signedAt = Date.UTC(y, mo - 1, d, h, mi, s);
  // A presigned request holds for its X-Amz-Expires; a signed header for the skew allowed.
  const lifetimeMs = parts.expiresSeconds === undefined ? SKEW_MS : parts.expiresSeconds * 1000;
  if (signedAt < now - lifetimeMs) {
    const window = lifetimeMs % 60_000 === 0 ? `${lifetimeMs / 60_000} min.` : `${lifetimeMs / 1000} sec.`;
    return invalid(`Signature expired: ${date} is now earlier than ${basic(now - lifetimeMs)} (${basic(now)} - ${window})`);
  }
  if (signedAt > now + SKEW_MS) {
    return invalid(`Signature not yet current: ${date} is still later than ${basic(now + SKEW_MS)} (${basic(now)} + 15 min.)`);
  }
  if (!parts.signedHeaders.includes('host')) return invalid("'Host' must be a 'SignedHeader' in the AWS Authorization.");
  if (parts.algorithm !== ALGORITHM) {
    return incomplete(`Unsupported AWS 'algorithm': '${parts.algorithm}' (only ${ALGORITHM} for now). `);
  }
  const scope = parts.credential.replace(/\/+$/, '').split('/');
  if (scope.length !== 5) {
    return incomplete(
      `Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '${parts.credential}'`,
    );
  }
  const [keyId, day, region, service, terminator] = scope as [string, string, string, string, string];
  let wrongScope = '';
  if (service !== SERVICE) wrongScope += `Credential should be scoped to correct service: '${SERVICE}'. `;
  if (terminator !== TERMINATOR)
    wrongScope += `Credential should be scoped with a valid terminator: '${TERMINATOR}', not '${terminator}'. `;
  if (day !== date.slice(0, 8)) {
    wrongScope += `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${day}' != '${date.slice(0, 8)}', from '${date}'.`;
  }
  if (wrongScope) return invalid(wrongScope.trim());
  if (keyId !== credentials.accessKeyId) {
    return new EngineError(400, `${coral}UnrecognizedClientException`, 'The security token included in the request is invalid.');
  }
  const canonical = canonicalRequest(request, parts.signedHeaders);
  const stringToSign = [ALGORITHM, date, `${day}/${region}/${service}/${terminator}`, sha256(canonical)].join('\n');
  let key: Buffer = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const step of [region, service, terminator]) key = hmac(key, step);
  const expected = Buffer.from(hmac(key, stringToSign).toString('hex'));
  const given = Buffer.from(parts.signature);
  if (given.length === expected.length && timingSafeEqual(given, expected)) return undefined;
  return invalid(
    'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
  );
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding, as the SDK's signer escapes a URI. */
const uriEscape = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

function decoded(text: string) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function canonicalRequest({ method, url, headers, body }: SignedRequest, signedHeaders: string[]) {
  const queryAt = url.indexOf('?');
  const path = queryAt >= 0 ? url.slice(0, queryAt) : url;
  const segments: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const normalized = `/${segments.join('/')}${segments.length > 0 && path.endsWith('/') ? '/' : ''}`;
  const query = (queryAt >= 0 ? url.slice(queryAt + 1) : '')
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      const [name, value] = at >= 0 ? [pair.slice(0, at), pair.slice(at + 1)] : [pair, ''];
      return [uriEscape(decoded(name)), uriEscape(decoded(value))] as const;
    })
    .filter(([name]) => name.toLowerCase() !== 'x-amz-signature')
    .sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  const names = [...new Set(signedHeaders)].sort();
  const canonicalHeaders = names.map((name) => {
    const value = headers[name];
    const text = Array.isArray(value) ? value.join(',') : (value ?? '');
    return `${name}:${text
      .replace(/[\r\n]/g, ' ')
      .replace(/[ \t]+/g, ' ')
      .replace(/^ | $/g, '')}`;
  });
  return [method, uriEscape(normalized).replace(/%2F/g, '/'), query, ...canonicalHeaders, '', names.join(';'), sha256(body)].join('\n');
}
