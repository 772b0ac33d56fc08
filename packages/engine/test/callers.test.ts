/**
 * Who an engine port serves: a request must name the engine by a loopback name, the address it
 * reached it at, or a name allowed explicitly (a web page's own name rebound to 127.0.0.1 is
 * none of them); a browser's request (with an Origin, preflights included) is served only with
 * CORS on. Refusals are DynamoDB-shaped and name the Host or Origin and the setting to change.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { hostServed } from '../src/callers.ts';
import { onlyEmbedded, ownEngine } from './support/engine.ts';

const signed = {
  authorization: 'AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=00',
  'x-amz-date': '20260101T000000Z',
  'x-amz-target': 'DynamoDB_20120810.ListTables',
  'content-type': 'application/x-amz-json-1.0',
};

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One raw request; `host: null` sends none at all. */
function send(endpoint: string, options: { method?: string; host?: string | null; headers?: Record<string, string>; body?: string }) {
  const url = new URL(endpoint);
  const headers = { ...options.headers, ...(options.host ? { host: options.host } : {}) };
  return new Promise<Reply>((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'POST', headers, setHost: options.host !== null }, (res) => {
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

describe('which Host names an engine serves', () => {
  const none = new Set<string>();
  test.each([
    'localhost',
    'LOCALHOST:8000',
    'localhost.:8000',
    'tools.localhost:8000',
    '127.0.0.1:8000',
    '127.9.8.7',
    '[::1]:8000',
    '[::ffff:7f00:1]:8000',
  ])('%s is a loopback name: served', (host) => {
    expect(hostServed(host, '127.0.0.1', none)).toBe(true);
  });

  test.each([
    'rebind.attacker.example:8000',
    '127.0.0.1.attacker.example',
    'localhost.attacker.example',
    '2130706433',
    '0x7f000001',
    '10.1.2.3:8000',
    'engine:8000',
    '',
  ])('%j is refused', (host) => {
    expect(hostServed(host, '127.0.0.1', none)).toBe(false);
  });

  test('the address a request reached the engine at is served as an IP literal, never as a name', () => {
    expect(hostServed('10.1.2.3:8000', '10.1.2.3', none)).toBe(true);
    expect(hostServed('10.1.2.3:8000', '::ffff:10.1.2.3', none)).toBe(true);
    expect(hostServed('[fd00::5]:8000', 'fd00::5', none)).toBe(true);
    expect(hostServed('10.1.2.4:8000', '10.1.2.3', none)).toBe(false);
    expect(hostServed(undefined, '127.0.0.1', none)).toBe(false);
  });

  test('an allowed name is served, in any case', () => {
    expect(hostServed('Engine:8000', '172.18.0.2', new Set(['engine']))).toBe(true);
  });
});

describe.skipIf(onlyEmbedded)('an engine port refuses other names and browsers', () => {
  const endpoint = inject('dynamodbEndpoint');
  const port = new URL(endpoint).port;

  test('a request naming another Host is refused before anything runs, naming the Host and --allowed-hosts', async () => {
    for (const method of ['POST', 'GET']) {
      const body = method === 'POST' ? '{}' : undefined;
      const reply = await send(endpoint, { method, host: `rebind.attacker.example:${port}`, headers: signed, body });
      expect(reply.status).toBe(400);
      const refusal = JSON.parse(reply.text);
      expect(refusal.__type).toBe('com.amazon.coral.service#AccessDeniedException');
      expect(refusal.message).toContain(`Host 'rebind.attacker.example:${port}' is not a loopback name or this engine's address`);
      expect(refusal.message).toContain('--allowed-hosts');
    }
    // HTTP/1.1 without a Host is refused by node:http itself (callers.ts refuses it too, for HTTP/1.0).
    expect((await send(endpoint, { host: null, headers: signed, body: '{}' })).status).toBe(400);
  });

  test('a loopback name is served', async () => {
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `tools.localhost:${port}`]) {
      expect((await send(endpoint, { host, headers: signed, body: '{}' })).status, host).toBe(200);
    }
  });

  test('without --cors a browser is refused, its preflight too, naming the Origin and --cors', async () => {
    const listed = await send(endpoint, { headers: { ...signed, origin: 'http://localhost:3000' }, body: '{}' });
    expect(listed.status).toBe(400);
    expect(listed.headers['access-control-allow-origin']).toBeUndefined();
    expect(JSON.parse(listed.text)).toEqual({
      __type: 'com.amazon.coral.service#AccessDeniedException',
      message: "Requests from browsers (Origin 'http://localhost:3000') are refused: turn on --cors to serve a browser-based tool",
    });
    const preflight = await send(endpoint, {
      method: 'OPTIONS',
      headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(400);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe.skipIf(onlyEmbedded)('an engine with allowed names and CORS on', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  beforeAll(async () => {
    setup = await ownEngine({ allowedHosts: ['engine'], cors: true });
  });
  afterAll(() => setup.engine.close());

  test('serves an allowed name and browsers, still refusing other names', async () => {
    const { port } = setup.engine;
    expect((await send(setup.engine.endpoint, { host: `engine:${port}`, headers: signed, body: '{}' })).status).toBe(200);
    const browser = await send(setup.engine.endpoint, { headers: { ...signed, origin: 'http://localhost:3000' }, body: '{}' });
    expect(browser.status).toBe(200);
    expect(browser.headers['access-control-allow-origin']).toBe('*');
    const other = await send(setup.engine.endpoint, { host: `rebind.attacker.example:${port}`, headers: signed, body: '{}' });
    expect(other.status).toBe(400);
  });
});
