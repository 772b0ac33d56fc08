/** API keys: refused when missing, wrong or revoked, over HTTP, WebSocket and SSE; read-only keys. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const WRITER = 'writer-key-0123456789abcdef';
const READER = 'reader-key-0123456789abcdef';
const REVOKED = 'revoked-key-0123456789abcd';
const dir = mkdtempSync(join(tmpdir(), 'runplane-keys-'));
const keysFile = join(dir, 'keys');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let api: TestServer;
beforeAll(async () => {
  writeFileSync(keysFile, `# keys of acme\n${WRITER}=acme\n${READER}=acme:read\n${REVOKED}=acme\n`);
  api = await startTestServer({ env: { RUNPLANE_API_KEYS_FILE: keysFile } });
});

const QUERY = '{ runs(first: 1) { edges { cursor } } }';
const status = async (headers: Record<string, string>) =>
  (
    await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query: QUERY }),
    })
  ).status;

/** How a WebSocket with these connectionParams is closed (or 'open' if it is accepted). */
function socketOutcome(connectionParams?: Record<string, unknown>) {
  return new Promise<number | 'open'>((resolve) => {
    const socket = new WebSocket(api.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: connectionParams })));
    socket.on('message', (data) => {
      if (JSON.parse(String(data)).type === 'connection_ack') {
        socket.close();
        resolve('open');
      }
    });
    socket.on('close', (code) => resolve(code));
  });
}

describe('over HTTP', () => {
  test('no key, a wrong key and a malformed header are 401; a valid key is served', async () => {
    expect(await status({})).toBe(401);
    expect(await status({ authorization: 'Bearer not-a-key-of-this-server' })).toBe(401);
    expect(await status({ authorization: WRITER })).toBe(401);
    expect(await status({ authorization: `Bearer ${WRITER}` })).toBe(200);
    const body = await (
      await fetch(api.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: QUERY }) })
    ).json();
    expect(body.errors[0]).toMatchObject({
      message: expect.stringContaining('API key is required'),
      extensions: { code: 'UNAUTHENTICATED' },
    });
  });
});

describe('over WebSocket', () => {
  test('no key and a wrong key close the socket with 4403 at connection_init; a valid key is acknowledged', async () => {
    expect(await socketOutcome()).toBe(4403);
    expect(await socketOutcome({ authorization: 'Bearer wrong-key-0123456789abcdef' })).toBe(4403);
    expect(await socketOutcome({ authorization: `Bearer ${WRITER}` })).toBe('open');
    expect(await socketOutcome({ apiKey: WRITER })).toBe('open');
  });
});

describe('over SSE', () => {
  test('no key and a wrong key are refused with 401', async () => {
    const query = 'subscription { leaseChanged(unitId: "u") { owner } }';
    await expect(subscribeSse(api.url, query, {}, 'leaseChanged').until(1)).rejects.toThrow(/HTTP 401/);
    await expect(subscribeSse(api.url, query, {}, 'leaseChanged', { key: 'wrong-key-0123456789abcdef' }).until(1)).rejects.toThrow(
      /HTTP 401/,
    );
  });
});

describe('read-only keys', () => {
  test('may read and subscribe, not mutate', async () => {
    expect(await status({ authorization: `Bearer ${READER}` })).toBe(200);
    const refused = await api.gql('mutation { createRun(input: { task: "t", budgetCap: 1 }) { __typename } }', {}, { key: READER });
    expect(refused.errors?.[0]).toMatchObject({ message: expect.stringContaining('read-only'), extensions: { code: 'FORBIDDEN' } });
    const ws = wsClient(api.url, { connectionParams: { authorization: `Bearer ${READER}` } });
    const sub = subscribeWs(ws, 'mutation { createRun(input: { task: "t", budgetCap: 1 }) { __typename } }', {}, 'createRun');
    await expect(sub.until(1)).rejects.toThrow(/read-only/);
    await ws.dispose();
    // Its error as over HTTP's body: the code, not the HTTP status yoga keeps for itself.
    const raw = await rawSocket(api.url, { connectionParams: { authorization: `Bearer ${READER}` } });
    raw.send({
      id: 'm',
      type: 'subscribe',
      payload: { query: 'mutation { createRun(input: { task: "t", budgetCap: 1 }) { __typename } }' },
    });
    await raw.until((frames) => frames.some((f) => f.id === 'm' && f.type !== 'unknown'), 'the answer');
    const answer = raw.frames.find((f) => f.id === 'm')?.message as { payload: { errors: { extensions: Record<string, unknown> }[] } };
    expect(answer.payload.errors[0]?.extensions).toEqual({ code: 'FORBIDDEN' });
    raw.close();
  });
});

describe('a revoked key', () => {
  test('is refused over HTTP, WebSocket and SSE once its line leaves the keys file', async () => {
    const ws = wsClient(api.url, { connectionParams: { authorization: `Bearer ${REVOKED}` } });
    expect(await status({ authorization: `Bearer ${REVOKED}` })).toBe(200);
    expect(await socketOutcome({ authorization: `Bearer ${REVOKED}` })).toBe('open');

    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n`);
    await waitFor(async () => (await status({ authorization: `Bearer ${REVOKED}` })) === 401, { what: 'the keys file to be re-read' });
    expect(await socketOutcome({ authorization: `Bearer ${REVOKED}` })).toBe(4403);
    await expect(
      subscribeSse(api.url, 'subscription { leaseChanged(unitId: "u") { owner } }', {}, 'leaseChanged', { key: REVOKED }).until(1),
    ).rejects.toThrow(/HTTP 401/);
    // A socket opened before the revocation is closed by the server (4403) and gets no new operations.
    const sub = subscribeWs(ws, '{ runs(first: 1) { edges { cursor } } }', {}, 'runs');
    await expect(sub.until(1)).rejects.toThrow(/4403|not valid|revoked/);
    await ws.dispose();
    expect(await status({ authorization: `Bearer ${WRITER}` })).toBe(200);
  });
});

describe('starting', () => {
  test('NODE_ENV=production refuses to start open unless told explicitly', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/RUNPLANE_ALLOW_OPEN=true/);
    expect(loadConfig({ NODE_ENV: 'production', RUNPLANE_ALLOW_OPEN: 'true' })).toMatchObject({
      production: true,
      graphiql: false,
      introspection: false,
    });
    expect(loadConfig({ NODE_ENV: 'production', RUNPLANE_API_KEYS: `${WRITER}=acme` })).toMatchObject({ production: true });
  });
});

describe('revoking a key ends what it has open', () => {
  test('its WebSocket is closed with 4403 and its SSE stream ends with UNAUTHENTICATED within seconds; neither gets another event', async () => {
    const LATER = 'revoked-later-0123456789abc';
    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n${LATER}=acme\n`);
    await waitFor(async () => (await status({ authorization: `Bearer ${LATER}` })) === 200, { what: 'the new key to be read' });
    const runId = `revoke-${Date.now()}`;
    await api.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`, {}, { key: WRITER });
    const append = () => api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "t" }) { __typename } }`, {}, { key: WRITER });
    const query = `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq } }`;
    const socket = new WebSocket(api.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    const received: number[] = [];
    const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${LATER}` } })));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data));
      if (message.type === 'connection_ack') socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query } }));
      if (message.type === 'next') received.push(message.payload.data.runEvents.seq);
    });
    const sse = subscribeSse<{ seq: number }>(api.url, query, {}, 'runEvents', { key: LATER });
    await append();
    await waitFor(() => received.length === 1, { what: 'the first event over WebSocket' });
    await sse.until(1);

    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n`);
    expect(await closed).toBe(4403);
    await waitFor(() => sse.completed || sse.errors.length > 0, { what: 'the SSE stream to end' });
    expect(JSON.stringify(sse.errors)).toMatch(/UNAUTHENTICATED|revoked/);
    await append();
    await append();
    // The writer's key still works; the revoked key's streams got nothing more.
    expect(await status({ authorization: `Bearer ${WRITER}` })).toBe(200);
    expect(received).toEqual([1]);
    expect(sse.items.map((e) => e.seq)).toEqual([1]);
  });
});

/** An SSE response read raw to its end: every frame, as text (at most 1 MB, then it is cut). */
function rawSse(request: { method: 'GET' | 'POST'; query: string; key: string }) {
  const abort = new AbortController();
  const state = { text: '', ended: false, status: 0 };
  const url = new URL(api.url);
  if (request.method === 'GET') url.searchParams.set('query', request.query);
  const done = (async () => {
    const response = await fetch(url, {
      method: request.method,
      headers: { accept: 'text/event-stream', authorization: `Bearer ${request.key}`, 'content-type': 'application/json' },
      body: request.method === 'POST' ? JSON.stringify({ query: request.query }) : undefined,
      signal: abort.signal,
    });
    state.status = response.status;
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      state.text += decoder.decode(chunk, { stream: true });
      if (state.text.length > 1_000_000) abort.abort();
    }
    state.ended = true;
  })().catch(() => {
    state.ended = true;
  });
  return { state, done, frames: () => state.text.split('\n\n').filter((frame) => /^event: /m.test(frame)) };
}

describe('revoking a key with several streams open', () => {
  test('ends each SSE stream (POST and GET, run and tenant-wide) with one error and complete, while other tenants are answered', async () => {
    const MANY = 'revoked-many-0123456789abcdef';
    const OTHER = 'other-tenant-0123456789abcdef';
    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n${MANY}=acme\n${OTHER}=globex\n`);
    await waitFor(async () => (await status({ authorization: `Bearer ${MANY}` })) === 200, { what: 'the new keys to be read' });
    const runId = `revoke-many-${Date.now()}`;
    await api.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`, {}, { key: WRITER });
    const queries = [
      `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq } }`,
      `subscription { runChanged(runId: "${runId}") { status } }`,
      'subscription { runsChanged { id } }',
      'subscription { leasesChanged { unitId } }',
    ];
    const streams = queries.flatMap((query) => [rawSse({ method: 'POST', query, key: MANY }), rawSse({ method: 'GET', query, key: MANY })]);
    const socket = new WebSocket(api.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${MANY}` } })));
    socket.on('message', (data) => {
      if (JSON.parse(String(data)).type !== 'connection_ack') return;
      socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'subscription { runsChanged { id } }' } }));
    });
    await waitFor(() => streams.every((stream) => stream.state.status === 200 && stream.state.text.length > 0), {
      what: 'every stream to be open',
    });

    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n${OTHER}=globex\n`);
    // Meanwhile another tenant is answered, request after request.
    const answered: string[] = [];
    while (!streams.every((stream) => stream.state.ended)) {
      const { data } = await api.gql('{ viewer { tenant } }', {}, { key: OTHER });
      answered.push(data.viewer.tenant);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await closed).toBe(4403);
    expect(answered.length).toBeGreaterThan(0);
    expect(new Set(answered)).toEqual(new Set(['globex']));
    for (const stream of streams) {
      const errors = stream.frames().filter((frame) => frame.includes('"errors"'));
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(/This API key was revoked/);
      expect(errors[0]).toMatch(/UNAUTHENTICATED/);
      expect(stream.frames().at(-1)).toMatch(/^event: complete/);
    }
    // Answered at once after the streams ended too.
    expect((await api.gql('{ viewer { tenant } }', {}, { key: OTHER })).data.viewer.tenant).toBe('globex');
  });
});

describe('a key revoked while its request`s body is on its way', () => {
  /** Sends the headers and part of the body, then (after `between`) the rest; the raw answer. */
  async function slowly(key: string, body: string, between: () => Promise<void>, accept = 'application/json') {
    const { connect } = await import('node:net');
    const url = new URL(api.url);
    const socket = connect(Number(url.port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk.toString();
    });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /graphql HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nAccept: ${accept}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`,
    );
    await between();
    socket.write(body.slice(5));
    return { socket, answer: () => answer };
  }

  test('its mutation and its subscription are refused once the body arrives, and nothing is written', async () => {
    const SLOW = 'revoked-slow-0123456789abcdef';
    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n${SLOW}=acme\n`);
    await waitFor(async () => (await status({ authorization: `Bearer ${SLOW}` })) === 200, { what: 'the new key to be read' });
    const runId = `slow-${Date.now()}`;
    await api.gql(`mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }`, {}, { key: WRITER });
    const revoke = async () => {
      writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n`);
      await waitFor(async () => (await status({ authorization: `Bearer ${SLOW}` })) === 401, { what: 'the revocation to be read' });
    };
    const mutation = await slowly(
      SLOW,
      JSON.stringify({ query: `mutation { appendEvent(input: { runId: "${runId}", type: "late" }) { __typename } }` }),
      revoke,
    );
    await waitFor(() => mutation.answer().includes('\r\n\r\n{'), { what: 'an answer to the mutation' });
    expect(mutation.answer()).toMatch(/^HTTP\/1.1 401/);
    expect(mutation.answer()).toMatch(/This API key was revoked/);
    mutation.socket.destroy();

    writeFileSync(keysFile, `${WRITER}=acme\n${READER}=acme:read\n${SLOW}=acme\n`);
    await waitFor(async () => (await status({ authorization: `Bearer ${SLOW}` })) === 200, { what: 'the key to be back' });
    const subscription = await slowly(
      SLOW,
      JSON.stringify({ query: `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq } }` }),
      revoke,
      'text/event-stream',
    );
    await waitFor(() => /revoked/.test(subscription.answer()), { what: 'the subscription to be refused' });
    await api.gql(`mutation { appendEvent(input: { runId: "${runId}", type: "after" }) { __typename } }`, {}, { key: WRITER });
    const { data } = await api.gql(
      `query { run(id: "${runId}", consistent: true) { events { edges { node { type } } } } }`,
      {},
      { key: WRITER },
    );
    expect(data.run.events.edges.map((e: { node: { type: string } }) => e.node.type)).toEqual(['after']);
    expect(subscription.answer()).not.toMatch(/"seq"/);
    subscription.socket.destroy();
  });
});
