/**
 * Browsers: a request with an Origin is served from the server's own origin or one listed in
 * RUNPLANE_CORS_ORIGINS (which alone get CORS headers), else refused before anything runs;
 * open (no keys), a Host that is not a loopback name or the server's address is refused too
 * (DNS rebinding). WebSocket upgrades are held to the same rules.
 */
import { request } from 'node:http';
import { beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One raw HTTP request (fetch may not set Host). */
function raw(url: string, { method = 'POST', headers = {}, body }: { method?: string; headers?: Record<string, string>; body?: string }) {
  return new Promise<Answer>((resolve, reject) => {
    const req = request(url, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const createRun = (id: string) =>
  JSON.stringify({ query: `mutation { createRun(input: { id: "${id}", task: "t", budgetCap: 1 }) { __typename } }` });

/** How a WebSocket upgrade with these headers ends: 'open', or the HTTP status it was refused with. */
function upgrade(url: string, headers: Record<string, string>) {
  return new Promise<number | 'open'>((resolve) => {
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws', { headers });
    socket.on('open', () => {
      socket.close();
      resolve('open');
    });
    socket.on('unexpected-response', (_, res) => resolve(res.statusCode ?? 0));
    socket.on('error', () => {});
  });
}

async function runExists(api: TestServer, id: string, key?: string) {
  const { data } = await api.gql(`query { run(id: "${id}", consistent: true) { id } }`, {}, { key });
  return data.run !== null;
}

describe('open (no keys), one origin of its own', () => {
  let api: TestServer;
  let port: string;
  beforeAll(async () => {
    api = await startTestServer({ RUNPLANE_CORS_ORIGINS: 'http://app.example:8080' });
    port = new URL(api.url).port;
  });

  test('a page of another origin is refused before anything runs, even a simple form post, and gets no CORS headers', async () => {
    const id = uniqueName('cross');
    for (const contentType of ['application/json', 'text/plain', 'application/x-www-form-urlencoded']) {
      const answer = await raw(api.url, {
        headers: { origin: 'http://evil.example', 'content-type': contentType, 'x-graphql-yoga-csrf': '1' },
        body: createRun(id),
      });
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body).errors[0]).toMatchObject({
        message: expect.stringContaining('origin "http://evil.example" are refused: list it in RUNPLANE_CORS_ORIGINS'),
        extensions: { code: 'FORBIDDEN' },
      });
      expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    }
    const preflight = await raw(api.url, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(await runExists(api, id)).toBe(false);
  });

  test('the server`s own origin is served without CORS headers; a listed origin gets them, without credentials', async () => {
    const own = await raw(api.url, {
      headers: { origin: `http://127.0.0.1:${port}`, 'content-type': 'application/json' },
      body: createRun(uniqueName('own')),
    });
    expect(own.status).toBe(200);
    expect(own.headers['access-control-allow-origin']).toBeUndefined();

    const preflight = await raw(api.url, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://app.example:8080',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers).toMatchObject({
      'access-control-allow-origin': 'http://app.example:8080',
      'access-control-allow-methods': expect.stringContaining('POST'),
      'access-control-allow-headers': expect.stringContaining('authorization'),
    });
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
    const id = uniqueName('listed');
    const listed = await raw(api.url, {
      headers: { origin: 'http://app.example:8080', 'content-type': 'application/json' },
      body: createRun(id),
    });
    expect(listed.status).toBe(200);
    expect(listed.headers['access-control-allow-origin']).toBe('http://app.example:8080');
    expect(listed.headers['access-control-allow-credentials']).toBeUndefined();
    expect(await runExists(api, id)).toBe(true);
  });

  test('a Host that is not a loopback name or the server`s address is refused (DNS rebinding); loopback names are served', async () => {
    const id = uniqueName('rebound');
    const rebound = await raw(api.url, {
      headers: { host: `attacker.example:${port}`, 'content-type': 'application/json' },
      body: createRun(id),
    });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body).errors[0].message).toMatch(
      /Host "attacker.example:\d+" is not a name this server answers to without API keys/,
    );
    expect(await runExists(api, id)).toBe(false);
    // The console and GraphiQL's page are refused alike: a rebound page gets nothing from this server.
    expect((await raw(api.url.replace('/graphql', '/'), { method: 'GET', headers: { host: 'attacker.example' } })).status).toBe(403);
    for (const host of [
      `localhost:${port}`,
      `localhost.:${port}`,
      `127.0.0.1:${port}`,
      `app.localhost:${port}`,
      `[::1]:${port}`,
      `[::ffff:7f00:1]:${port}`,
    ]) {
      const answer = await raw(api.url, {
        headers: { host, 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ viewer { tenant } }' }),
      });
      expect(answer.status).toBe(200);
    }
    for (const host of ['localhost.attacker.example', '127.0.0.1.nip.io', '[::ffff:a00:1]', '0.0.0.0']) {
      expect((await raw(api.url, { headers: { host, 'content-type': 'application/json' }, body: createRun(id) })).status).toBe(403);
    }
    // Probes answer whatever the Host (a load balancer names the server its own way).
    expect((await raw(api.url.replace('/graphql', '/health'), { method: 'GET', headers: { host: 'lb.internal' } })).status).toBe(200);
  });

  test('a WebSocket from another origin, or to a rebound Host, is refused at the upgrade; the own origin connects', async () => {
    expect(await upgrade(api.url, { origin: 'http://evil.example' })).toBe(403);
    expect(await upgrade(api.url, { host: 'attacker.example' })).toBe(403);
    expect(await upgrade(api.url, { origin: `http://127.0.0.1:${port}` })).toBe('open');
    expect(await upgrade(api.url, { origin: 'http://app.example:8080' })).toBe('open');
  });
});

describe('with API keys', () => {
  const KEY = 'browser-key-0123456789abcdef';
  let api: TestServer;
  beforeAll(async () => {
    api = await startTestServer({ RUNPLANE_API_KEYS: `${KEY}=acme`, RUNPLANE_CORS_ORIGINS: 'https://app.example' });
  });

  test('a listed origin`s preflight is answered before the key is asked for; another origin is refused even with a key', async () => {
    const preflight = await raw(api.url, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
    const id = uniqueName('keyed');
    const refused = await raw(api.url, {
      headers: { origin: 'https://evil.example', authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: createRun(id),
    });
    expect(refused.status).toBe(403);
    expect(await runExists(api, id, KEY)).toBe(false);
  });

  test('any Host is served (the key is the check), and no CORS header goes to an origin not listed', async () => {
    const answer = await raw(api.url, {
      headers: { host: 'runplane.internal', authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ viewer { tenant } }' }),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('open, listening on every address', () => {
  test('the any-address as typed, and this machine`s addresses, are served; another name is not', async () => {
    const { browserPolicy } = await import('../../src/http/browsers.ts');
    const policy = browserPolicy({ corsOrigins: [], open: true, listenHost: '0.0.0.0', allowedHosts: ['runplane.internal'] });
    const request = (host: string) => ({ headers: { host } }) as never;
    for (const host of ['0.0.0.0:4000', 'localhost:4000', 'runplane.internal', '127.0.0.1'])
      expect(policy.refusal(request(host))).toBeUndefined();
    expect(policy.refusal(request('attacker.example'))).toMatch(/not a name this server answers to/);
  });
});
