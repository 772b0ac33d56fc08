/**
 * The engine's HTTP front door answers as DynamoDB does before an operation runs: the
 * request's size, method and content type, a body that is not JSON, a missing or incomplete
 * signature, an empty body; and CORS when asked for. Expected bodies and their order are
 * DynamoDB's, as dynalite's test suite recorded them against it.
 */
import { request } from 'node:http';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { onlyEmbedded, ownEngine } from './support/engine.ts';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One raw HTTP request (the SDK would sign and shape it; these tests need the wire as it is). */
function send(endpoint: string, options: { method?: string; path?: string; headers?: Record<string, string>; body?: string }) {
  const url = new URL(options.path ?? '/', endpoint);
  return new Promise<Reply>((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'POST', headers: options.headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A well-formed signature; an engine without credentials checks its shape, never its value. */
const signed = {
  authorization: 'AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc',
  'x-amz-date': '20260101T000000Z',
};
const listTables = 'DynamoDB_20120810.ListTables';

describe.skipIf(onlyEmbedded)('the front door', () => {
  const endpoint = inject('dynamodbEndpoint');
  const post = (headers: Record<string, string>, body?: string, path?: string) => send(endpoint, { headers, body, path });

  test('a body over 16 MiB is refused with 413 at once; one of exactly 16 MiB is read', async () => {
    const limit = 16 * 1024 * 1024;
    const over = await post({}, 'a'.repeat(limit + 1));
    expect(over.status).toBe(413);
    expect(over.headers['transfer-encoding']).toBe('chunked');
    // Read whole, then refused for its missing content type.
    expect((await post({}, 'a'.repeat(limit))).status).toBe(404);
  });

  test.each([
    ['no content type', {}],
    ['an unknown content type', { 'content-type': 'whatever' }],
    ['JSON 1.1', { 'content-type': 'application/x-amz-json-1.1' }],
    ['a content type that only starts like JSON', { 'content-type': 'application/jsonasdf' }],
  ])('a body with %s is answered 404', async (_, headers) => {
    const reply = await post(headers, 'hi');
    expect(reply.status).toBe(404);
    expect(reply.text).toBe('<UnknownOperationException/>\n');
    expect(reply.headers['x-amz-crc32']).toBe('3552371480');
    expect(reply.headers['x-amzn-requestid']).toMatch(/^[0-9A-Z]{52}$/);
  });

  test.each(['PUT', 'DELETE', 'OPTIONS'])('%s is answered 404', async (method) => {
    const reply = await send(endpoint, { method });
    expect(reply.status).toBe(404);
    expect(reply.text).toBe('<UnknownOperationException/>\n');
  });

  test('GET is a health check naming the engine region', async () => {
    const reply = await send(endpoint, { method: 'GET' });
    expect(reply.status).toBe(200);
    expect(reply.text).toMatch(/^healthy: dynamodb\.[a-z0-9-]+\.amazonaws\.com $/);
    expect(reply.headers['content-length']).toBe(String(reply.text.length));
  });

  test.each([
    ['application/json', 'application/json'],
    ['application/x-amz-json-1.0', 'application/x-amz-json-1.0'],
    ['application/json;', 'application/json'],
    ['  application/json  ;   asfd', 'application/json'],
    ['application/x-amz-json-1.0;blahblah', 'application/x-amz-json-1.0'],
  ])('a body that is not JSON (%s) is a SerializationException with nothing but its type', async (contentType, replyType) => {
    const reply = await post({ 'content-type': contentType }, 'hi');
    expect(reply.status).toBe(400);
    expect(reply.text).toBe('{"__type":"com.amazon.coral.service#SerializationException"}');
    expect(reply.headers['content-type']).toBe(replyType);
    expect(reply.headers['x-amz-crc32']).toBe('3948637019');
  });

  test('the body is read before the target, the target before the signature', async () => {
    const unknownTarget = await post({ 'content-type': 'application/json', 'x-amz-target': 'DynamoDB_20120810.ListTable' }, '{}');
    expect(JSON.parse(unknownTarget.text).__type).toBe('com.amazon.coral.service#UnknownOperationException');
    const notJson = await post({ 'content-type': 'application/json', 'x-amz-target': 'DynamoDB_20120810.ListTable' }, '{');
    expect(JSON.parse(notJson.text).__type).toBe('com.amazon.coral.service#SerializationException');
  });

  const missing = {
    __type: 'com.amazon.coral.service#MissingAuthenticationTokenException',
    message: 'Request is missing Authentication Token',
  };
  test.each([
    ['no Authorization header', {}, undefined],
    ['an Authorization header that is not AWS4-', { authorization: 'AWS4' }, undefined],
    ['a header that is not AWS4- and a query without X-Amz-Algorithm', { authorization: 'X' }, '/?X-Amz-Algorith'],
    ['every query parameter but X-Amz-Algorithm', {}, '/?X-Amz-Credential=a&X-Amz-Signature=b&X-Amz-SignedHeaders=c&X-Amz-Date=d'],
  ])('a request with %s is a MissingAuthenticationTokenException', async (_, headers, path) => {
    const reply = await post({ 'x-amz-target': listTables, ...headers }, undefined, path);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.text)).toEqual(missing);
    expect(reply.headers['x-amz-crc32']).toBe('2088342776');
  });

  test('a signature in both the header and the query is an InvalidSignatureException', async () => {
    const reply = await post({ 'x-amz-target': listTables, authorization: 'X' }, undefined, '/?X-Amz-Algorithm');
    expect(JSON.parse(reply.text)).toEqual({
      __type: 'com.amazon.coral.service#InvalidSignatureException',
      message: "Found both 'X-Amz-Algorithm' as a query-string param and 'Authorization' as HTTP header.",
    });
  });

  test.each([
    [
      { authorization: 'AWS4-' },
      undefined,
      "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. " +
        "Authorization header requires 'SignedHeaders' parameter. Authorization header requires existence of either a " +
        "'X-Amz-Date' or a 'Date' header. Authorization=AWS4-",
    ],
    [
      { authorization: 'AWS4- Signature=b, Credential=a', date: 'a' },
      undefined,
      "Authorization header requires 'SignedHeaders' parameter. Authorization=AWS4- Signature=b, Credential=a",
    ],
    [
      {},
      '/?X-Amz-Algorithm=a&X-Amz-Credential=b&X-Amz-Signature=c&X-Amz-Date=d',
      "AWS query-string parameters must include 'X-Amz-SignedHeaders'. Re-examine the query-string parameters.",
    ],
  ])('an incomplete signature (%j %s) is an IncompleteSignatureException saying what is missing', async (headers, path, message) => {
    const reply = await post({ 'x-amz-target': listTables, ...headers }, undefined, path);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.text)).toEqual({ __type: 'com.amazon.coral.service#IncompleteSignatureException', message });
    expect(reply.headers['x-amz-crc32']).toBe(String(crc32(reply.text)));
  });

  test('a signed request without a body is a SerializationException; with one it is served', async () => {
    const empty = await post({ 'x-amz-target': listTables, ...signed });
    expect(empty.status).toBe(400);
    expect(JSON.parse(empty.text)).toEqual({ __type: 'com.amazon.coral.service#SerializationException' });
    const served = await post({ 'x-amz-target': listTables, 'content-type': 'application/x-amz-json-1.0', ...signed }, '{}');
    expect(served.status).toBe(200);
    expect(JSON.parse(served.text).TableNames).toBeInstanceOf(Array);
  });

  test('without --cors a request with an Origin is refused without CORS headers, a preflight too (callers.test.ts)', async () => {
    const preflight = await send(endpoint, { method: 'OPTIONS', headers: { origin: 'https://example.com' } });
    expect(preflight.status).toBe(400);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    const listed = await post(
      { 'x-amz-target': listTables, 'content-type': 'application/json', origin: 'https://example.com', ...signed },
      '{}',
    );
    expect(JSON.parse(listed.text).__type).toBe('com.amazon.coral.service#AccessDeniedException');
    expect(listed.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe.skipIf(onlyEmbedded)('the front door with CORS on', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  beforeAll(async () => {
    setup = await ownEngine({ cors: true });
  });
  afterAll(() => setup.engine.close());

  test('a preflight is allowed whatever it asks, for two days', async () => {
    const reply = await send(setup.engine.endpoint, {
      method: 'OPTIONS',
      headers: { origin: 'whatever', 'access-control-request-headers': 'a, b, c', 'access-control-request-method': 'd' },
    });
    expect(reply.status).toBe(200);
    expect(reply.text).toBe('');
    expect(reply.headers).toMatchObject({
      'access-control-allow-origin': '*',
      'access-control-allow-headers': 'a, b, c',
      'access-control-allow-methods': 'd',
      'access-control-max-age': '172800',
      'content-length': '0',
    });
    expect(reply.headers['x-amzn-requestid']).toMatch(/^[0-9A-Z]{52}$/);
  });

  test('answers and refusals carry Access-Control-Allow-Origin when the request has an Origin', async () => {
    const listed = await send(setup.engine.endpoint, {
      headers: { 'x-amz-target': listTables, 'content-type': 'application/json', origin: 'whatever', ...signed },
      body: '{}',
    });
    expect(listed.status).toBe(200);
    expect(listed.headers['access-control-allow-origin']).toBe('*');
    const refused = await send(setup.engine.endpoint, { headers: { origin: 'whatever', ...signed } });
    expect(refused.status).toBe(400);
    expect(refused.headers['access-control-allow-origin']).toBe('*');
    // Without an Origin, no CORS header.
    const plain = await send(setup.engine.endpoint, { method: 'GET' });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });
});
