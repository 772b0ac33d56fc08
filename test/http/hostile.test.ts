/** Hostile GraphQL and protocol abuse: each is refused clearly, and the server keeps serving. */
import { connect } from 'node:net';
import type { Engine } from '@runplane/engine';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import WebSocket from 'ws';
import { uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

async function post(body: string, headers: Record<string, string> = {}) {
  const response = await fetch(api.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return {
    status: response.status,
    body: (await response.json().catch(() => undefined)) as { errors?: { message: string; extensions?: Record<string, unknown> }[] },
  };
}
const query = (text: string) => post(JSON.stringify({ query: text }));
const stillServing = async () => expect((await query('{ __typename }')).body).toEqual({ data: { __typename: 'Query' } });

describe('query limits', () => {
  test.each([
    ['depth', `{ ${'runs { edges { node { '.repeat(4)}id${' } } }'.repeat(4)} }`, /depth/i],
    ['aliases', `{ ${Array.from({ length: 20 }, (_, i) => `a${i}: lease(unitId: "u") { owner }`).join(' ')} }`, /aliases/i],
    ['tokens', `{ ${'__typename '.repeat(6000)} }`, /token/i],
    ['cost', '{ runs(first: 500) { edges { node { events(first: 500) { edges { node { seq type payload } } } } } } }', /cost/i],
    ['directives', `{ __typename ${'@include(if: true) '.repeat(30)} }`, /directive/i],
  ])('too much %s is refused before it runs', async (_, text, message) => {
    const { status, body } = await query(text);
    expect(status).toBeLessThan(500);
    expect(body.errors?.[0]?.message).toMatch(message);
    await stillServing();
  });

  test('a literal nested thousands deep is refused, not a crash', async () => {
    const deep = `mutation { appendEvent(input: { runId: "r", type: "t", payload: ${'['.repeat(20_000)}${']'.repeat(20_000)} }) { __typename } }`;
    const { status, body } = await query(deep);
    expect(status).toBeLessThan(500);
    expect(body.errors?.[0]?.message).toMatch(/nests deeper than 64/);
    // Variables nested as deep are refused by the JSON parser, also with a client error.
    const variables = `{"query":"query($p: JSON) { __typename }","variables":{"p":${'['.repeat(200_000)}${']'.repeat(200_000)}}}`;
    expect((await post(variables)).status).toBeLessThan(500);
    await stillServing();
  });

  test('a body over the limit is 413; one without a length is 411', async () => {
    const big = await post(JSON.stringify({ query: '{ __typename }', variables: { pad: 'x'.repeat(2 * 1024 * 1024) } }));
    expect(big.status).toBe(413);
    expect(big.body.errors?.[0]?.message).toMatch(/larger than/);
    const chunked = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(JSON.stringify({ query: '{ __typename }' })));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(411);
    await stillServing();
  });

  test('a body longer than its Content-Length is not read past the length: the connection is refused', async () => {
    const { hostname, port } = new URL(api.url);
    const body = JSON.stringify({ query: '{ __typename }' });
    // The length covers the operation; 2 MB more follow on the same connection.
    const head = `POST /graphql HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.end(head + body + 'x'.repeat(2 * 1024 * 1024)));
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk;
      });
      socket.on('close', () => resolve(text));
      socket.on('error', (err) => (text ? resolve(text) : reject(err)));
    });
    // What follows the declared length is a malformed next request: Node's parser refuses the
    // connection (400) rather than reading it as more body.
    expect(answer).toMatch(/HTTP\/1\.1 400/);
    expect(answer).not.toMatch(/HTTP\/1\.1 5\d\d/);
    await stillServing();
  });

  test('batches are refused', async () => {
    const { status, body } = await post(JSON.stringify([{ query: '{ __typename }' }, { query: '{ __typename }' }]));
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(body.errors?.[0]?.message).toBeTruthy();
  });

  test('a GET without the CSRF header is refused; with it, it is served', async () => {
    const url = `${api.url}?query=${encodeURIComponent('{ __typename }')}`;
    expect((await fetch(url)).status).toBe(403);
    expect((await fetch(url, { headers: { 'x-graphql-yoga-csrf': '1' } })).status).toBe(200);
  });

  test('unexpected errors carry no stack or internals', async () => {
    const response = await query('{ run(id: "x") { events(before: "c2VxOjA") { edges { cursor } } } }');
    expect(JSON.stringify(response.body)).not.toMatch(/at .*\.ts:\d+|node_modules|stack/);
  });
});

describe('production defaults', () => {
  test('introspection and GraphiQL are off, field suggestions are not given', async () => {
    const prod = await startTestServer({ env: { NODE_ENV: 'production', RUNPLANE_ALLOW_OPEN: 'true' } });
    const introspect = await prod.gql('{ __schema { types { name } } }');
    expect(introspect.errors?.[0]?.message).toMatch(/introspection/i);
    const page = await fetch(prod.url, { headers: { accept: 'text/html', 'x-graphql-yoga-csrf': '1' } });
    expect(await page.text()).not.toMatch(/<html/i);
    const typo = await prod.gql('{ rnus { edges { cursor } } }');
    expect(typo.errors?.[0]?.message).not.toMatch(/Did you mean/);
    const dev = await api.gql('{ rnus { edges { cursor } } }');
    expect(dev.errors?.[0]?.message).toMatch(/Did you mean "runs"/);
  });
});

describe('graphql-ws protocol abuse closes the socket with the protocol codes', () => {
  const open = () =>
    new Promise<WebSocket>((resolve, reject) => {
      const socket = new WebSocket(api.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
      socket.on('open', () => resolve(socket));
      socket.on('error', reject);
    });
  const closeCode = (socket: WebSocket) => new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));

  test('an operation before connection_init: 4401', async () => {
    const socket = await open();
    const closed = closeCode(socket);
    socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: '{ __typename }' } }));
    expect(await closed).toBe(4401);
  });

  test('two connection_inits: 4429', async () => {
    const socket = await open();
    const closed = closeCode(socket);
    socket.send(JSON.stringify({ type: 'connection_init' }));
    socket.send(JSON.stringify({ type: 'connection_init' }));
    expect(await closed).toBe(4429);
  });

  test('an unknown message: 4400', async () => {
    const socket = await open();
    const closed = closeCode(socket);
    socket.send(JSON.stringify({ type: 'connection_init' }));
    socket.send(JSON.stringify({ type: 'make_me_admin' }));
    expect(await closed).toBe(4400);
  });

  test('a message over the size limit: 1009, and nothing printed (a client sending them in a loop cannot flood the log)', async () => {
    const printed = vi.spyOn(console, 'error');
    try {
      for (let i = 0; i < 3; i++) {
        const socket = await open();
        const closed = closeCode(socket);
        socket.send(JSON.stringify({ type: 'connection_init', payload: { pad: 'x'.repeat(2 * 1024 * 1024) } }));
        expect(await closed).toBe(1009);
      }
      expect(printed).not.toHaveBeenCalled();
    } finally {
      printed.mockRestore();
    }
  });

  test('no connection_init in time: 4408', async () => {
    const socket = await open();
    expect(await closeCode(socket)).toBe(4408);
  }, 10_000);

  test('limits apply over WebSocket exactly as over HTTP', async () => {
    const socket = await open();
    const messages: { type: string; payload?: { message: string }[] }[] = [];
    socket.on('message', (data) => messages.push(JSON.parse(String(data))));
    socket.send(JSON.stringify({ type: 'connection_init' }));
    const acked = Date.now() + 5000;
    while (!messages.some((m) => m.type === 'connection_ack') && Date.now() < acked)
      await new Promise((resolve) => setTimeout(resolve, 10));
    socket.send(
      JSON.stringify({
        id: '1',
        type: 'subscribe',
        payload: { query: `{ ${Array.from({ length: 20 }, (_, i) => `a${i}: lease(unitId: "u") { owner }`).join(' ')} }` },
      }),
    );
    const deadline = Date.now() + 5000;
    while (!messages.some((m) => m.type === 'error') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(messages.find((m) => m.type === 'error')?.payload?.[0]?.message).toMatch(/aliases/i);
    socket.close();
  });
});

describe.skipIf(onlyEmbedded)('DynamoDB unreachable or throttling', () => {
  let engine: Engine;
  let own: TestServer;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    // Two tries, no wait between them: the refusal, not the patience before it, is what is tested here.
    own = await startTestServer({ endpoint: engine.endpoint, throttleRetry: { attempts: 2, backoff: { firstMs: 1, maxMs: 1 } } });
  });
  afterAll(() => engine.close());

  test('throttling gives a retryable THROTTLED error, and service resumes after it', async () => {
    const runId = uniqueName('run');
    using _ = engine.faults.inject({ operations: ['TransactWriteItems'], error: 'ProvisionedThroughputExceededException' });
    const refused = await own.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`);
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'THROTTLED', retryable: true });
    engine.faults.clear();
    const ok = await own.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`);
    expect(ok.data.createRun.__typename).toBe('Run');
  });

  test('failing or unreachable DynamoDB gives a retryable UNAVAILABLE error within bounded time', async () => {
    using _ = engine.faults.inject({ operations: '*', error: 'InternalServerError' });
    const started = performance.now();
    const refused = await own.gql(`{ run(id: "${uniqueName('run')}") { id } }`);
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(refused.errors?.[0]?.message).not.toMatch(/InternalServerError|dynamodb\.v2012/);
    expect(performance.now() - started).toBeLessThan(15_000);
  });
});

afterAll(async () => {
  await stillServing();
});
