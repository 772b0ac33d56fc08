/**
 * Every cap on what one client may hold or ask, reached on purpose: each refusal names its
 * limit and variable, comes before work is done, and leaves the server serving others.
 */
import { describe, expect, test } from 'vitest';
import { errorsOf, rawSocket } from '../support/raw-ws.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const LEASE_CHANGED = 'subscription($u: ID!) { leaseChanged(unitId: $u) { owner } }';

/** A run with an event for each payload given. */
const runWith = (api: TestServer, events: unknown[] = []) => newRun(api, { budgetCap: 1, events });

const stillServing = async (api: TestServer) => expect((await api.gql('{ __typename }')).data).toEqual({ __typename: 'Query' });

describe('subscription caps', () => {
  test('per connection: the next subscribe on the socket is refused naming the limit; a completed one frees its place', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION: '5' });
    const socket = await rawSocket(api.url);
    for (let i = 1; i <= 6; i++) socket.subscribe(`s${i}`, LEASE_CHANGED, { u: `u${i}` });
    await socket.until((frames) => errorsOf(frames, 's6') !== undefined, 'the sixth subscribe to be refused');
    expect(errorsOf(socket.frames, 's6')?.[0]).toMatchObject({
      message: expect.stringMatching(/Too many subscriptions on this connection \(limit 5, RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION\)/),
      extensions: { code: 'LIMIT_EXCEEDED' },
    });
    expect([1, 2, 3, 4, 5].map((i) => errorsOf(socket.frames, `s${i}`))).toEqual([undefined, undefined, undefined, undefined, undefined]);
    socket.send({ id: 's1', type: 'complete' });
    // The place is given back when graphql-ws ends the operation; the next subscribe may take it.
    await waitFor(
      async () => {
        const id = `again-${socket.frames.length}`;
        socket.subscribe(id, LEASE_CHANGED, { u: 'again' });
        await new Promise((resolve) => setTimeout(resolve, 50));
        return errorsOf(socket.frames, id) === undefined;
      },
      { what: 'a freed place' },
    );
    socket.close();
    await stillServing(api);
  });

  test('per tenant, across WebSocket and SSE: past the cap a subscribe is refused on both', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: '3' });
    const socket = await rawSocket(api.url);
    socket.subscribe('a', LEASE_CHANGED, { u: 'a' });
    socket.subscribe('b', LEASE_CHANGED, { u: 'b' });
    const sse = subscribeSse(api.url, LEASE_CHANGED, { u: 'c' }, 'leaseChanged');
    await waitFor(() => api.server.live.openSubscriptions >= 3, { what: 'three open subscriptions' });
    socket.subscribe('d', LEASE_CHANGED, { u: 'd' });
    await socket.until((frames) => errorsOf(frames, 'd') !== undefined, 'the fourth subscription to be refused');
    expect(errorsOf(socket.frames, 'd')?.[0]?.message).toMatch(/limit 3, RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT/);
    await expect(subscribeSse(api.url, LEASE_CHANGED, { u: 'e' }, 'leaseChanged').until(1)).rejects.toThrow(
      /HTTP 429.*RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT/,
    );
    sse.stop();
    socket.close();
  });

  test('an SSE subscription its client leaves at once gives its place back', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: '2', RUNPLANE_MAX_CONNECTIONS_PER_TENANT: '2' });
    for (let i = 0; i < 6; i++) {
      const left = subscribeSse(api.url, LEASE_CHANGED, { u: `gone-${i}` }, 'leaseChanged');
      await waitFor(() => api.server.app.admission.usage('default').subscriptions > 0 || left.errors.length > 0, {
        what: 'the subscription',
      });
      left.stop();
      await waitFor(() => api.server.app.admission.usage('default').subscriptions === 0, { what: 'its place to be given back' });
    }
    const kept = [
      subscribeSse(api.url, LEASE_CHANGED, { u: 'a' }, 'leaseChanged'),
      subscribeSse(api.url, LEASE_CHANGED, { u: 'b' }, 'leaseChanged'),
    ];
    await waitFor(() => api.server.app.admission.usage('default').subscriptions === 2, { what: 'two places taken' });
    expect(kept.flatMap((k) => k.errors)).toEqual([]);
    for (const k of kept) k.stop();
  });

  test('connections per tenant: a WebSocket past the cap is closed with 4429, an SSE stream refused with 429', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_CONNECTIONS_PER_TENANT: '2' });
    const first = await rawSocket(api.url);
    const second = await rawSocket(api.url);
    const third = await rawSocket(api.url, { init: false });
    third.send({ type: 'connection_init' });
    expect(await third.closed).toEqual({ code: 4429, reason: expect.stringMatching(/RUNPLANE_MAX_CONNECTIONS_PER_TENANT/) });
    await expect(subscribeSse(api.url, LEASE_CHANGED, { u: 'x' }, 'leaseChanged').until(1)).rejects.toThrow(
      /HTTP 429.*RUNPLANE_MAX_CONNECTIONS_PER_TENANT/,
    );
    first.close();
    await first.closed;
    await waitFor(async () => {
      const again = await rawSocket(api.url, { init: false });
      again.send({ type: 'connection_init' });
      const acked = await Promise.race([
        again.until((frames) => frames.some((f) => f.type === 'connection_ack'), 'ack', 2_000).then(() => true),
        again.closed.then(() => false),
      ]).catch(() => false);
      again.close();
      return acked;
    });
    second.close();
  });

  test('a flood of subscribes on one socket is refused at the setup rate, cheaply, and others are served meanwhile', async () => {
    const api = await startTestServer({ RUNPLANE_SUBSCRIBE_RATE: '10' });
    const runId = await runWith(api);
    const socket = await rawSocket(api.url);
    const runEvents = 'subscription($r: ID!) { runEvents(runId: $r) { seq } }';
    for (let i = 0; i < 3000; i++) socket.subscribe(`f${i}`, runEvents, { r: runId });
    const append = api.gql('mutation($r: ID!) { appendEvent(input: { runId: $r, type: "other.client" }) { __typename } }', { r: runId });
    expect((await append).data.appendEvent.__typename).toBe('Event');
    await stillServing(api);
    await socket.until((frames) => frames.filter((f) => f.type === 'error').length >= 2900, 'the flood to be answered', 30_000);
    const refused = socket.frames
      .filter((f) => f.type === 'error')
      .map((f) => (f.message?.payload as { extensions: { code: string } }[] | undefined)?.[0]);
    const codes = new Set(refused.map((e) => e?.extensions.code));
    expect(codes.has('RATE_LIMITED')).toBe(true);
    expect(refused.find((e) => e?.extensions.code === 'RATE_LIMITED')).toMatchObject({
      message: expect.stringMatching(/at most 10 a second, RUNPLANE_SUBSCRIBE_RATE.*retry in \d+ ms/),
      extensions: { retryAfterMs: expect.any(Number) },
    });
    // At most the burst (twice the rate) and what refilled meanwhile got through, and never more than the per-connection cap.
    expect(api.server.live.openSubscriptions).toBeLessThanOrEqual(100);
    socket.close();
  });
});

describe('cost with variables applied', () => {
  const NESTED = `query($n: Int!) { runs(first: $n) { edges { node { events(first: $n) { edges { node { seq payload } } } } } } }`;

  test('a page of pages is refused whether the sizes are literals, variables or variable defaults', async () => {
    const api = await startTestServer();
    // Allowed first with small pages: what it cost then is not kept for the same document with large ones.
    expect((await api.gql(NESTED, { n: 5 })).errors).toBeUndefined();
    const refusals = [
      await api.gql(NESTED, { n: 500 }),
      await api.gql(NESTED.replace('$n: Int!', '$n: Int = 500'), {}),
      await api.gql(NESTED.replaceAll('$n', '500').replace('(500: Int!)', '')),
    ];
    for (const refused of refusals) {
      expect(refused.errors?.[0], JSON.stringify(refused)).toMatchObject({
        message: expect.stringMatching(/cost is \d+, over the limit of 100000 \(RUNPLANE_MAX_QUERY_COST\)/),
        extensions: { code: 'COST_LIMIT' },
      });
      expect(refused.data).toBeUndefined();
    }
    expect((await api.gql(NESTED, { n: 5 })).errors).toBeUndefined();
  });

  test('a payload costs its limit: 15 aliases of events(first: $m) with payloads are refused before they run', async () => {
    const api = await startTestServer();
    const aliases = Array.from({ length: 15 }, (_, i) => `a${i}: run(id: $id) { events(first: $m) { edges { node { payload } } } }`).join(
      ' ',
    );
    const refused = await api.gql(`query($id: ID!, $m: Int) { ${aliases} }`, { id: 'x', m: 500 });
    expect(refused.errors?.[0]?.extensions?.code).toBe('COST_LIMIT');
    // Without payloads the same pages are cheap.
    const cheap = await api.gql(`query($id: ID!, $m: Int) { ${aliases.replaceAll('payload', 'seq')} }`, { id: 'x', m: 500 });
    expect(cheap.errors).toBeUndefined();
  });

  test('a page over RUNPLANE_MAX_PAGE_SIZE is refused naming the field, from a variable too, and over WebSocket', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_PAGE_SIZE: '10' });
    const refused = await api.gql('query($n: Int) { runs(first: $n) { edges { cursor } } }', { n: 11 });
    expect(refused.errors?.[0]).toMatchObject({
      message: expect.stringContaining('runs.first: must be from 0 to 10 (RUNPLANE_MAX_PAGE_SIZE)'),
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect((await api.gql('query($n: Int) { runs(first: $n) { edges { cursor } } }', { n: 10 })).errors).toBeUndefined();
    const socket = await rawSocket(api.url);
    socket.subscribe('q', 'query($n: Int) { run(id: "x") { events(last: $n) { edges { cursor } } } }', { n: 11 });
    await socket.until((frames) => errorsOf(frames, 'q') !== undefined, 'the refusal');
    expect(errorsOf(socket.frames, 'q')?.[0]?.message).toMatch(/events\.last: must be from 0 to 10/);
    socket.close();
  });
});

describe('response size', () => {
  test('a response that would pass RUNPLANE_MAX_RESPONSE_BYTES is refused once its reads reach it, not built', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_RESPONSE_BYTES: '65536' });
    const runId = await runWith(
      api,
      Array.from({ length: 12 }, (_, i) => ({ i, blob: 'x'.repeat(16 * 1024) })),
    );
    const one = await api.gql('query($id: ID!) { run(id: $id) { events(first: 3) { edges { node { seq payload } } } } }', { id: runId });
    expect(one.errors).toBeUndefined();
    const aliases = Array.from({ length: 4 }, (_, i) => `a${i}: run(id: $id) { events(first: 12) { edges { node { payload } } } }`).join(
      ' ',
    );
    const response = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `query($id: ID!) { ${aliases} }`, variables: { id: runId } }),
    });
    const text = await response.text();
    const body = JSON.parse(text);
    expect(body.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/larger than 65536 bytes \(RUNPLANE_MAX_RESPONSE_BYTES\)/),
      extensions: { code: 'RESPONSE_TOO_LARGE' },
    });
    // What was sent stayed near the limit: not four times 12 events of 16 KB.
    expect(text.length).toBeLessThan(2 * 65536);
  });

  test('the limit is in bytes as sent: payloads past ASCII (3 bytes a character) count as such', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_RESPONSE_BYTES: '65536' });
    // 10 events of 4,000 characters: 40,000 characters, 120,000 bytes in UTF-8.
    const runId = await runWith(
      api,
      Array.from({ length: 10 }, (_, i) => ({ i, text: 'あ'.repeat(4000) })),
    );
    const read = (first: number) =>
      fetch(api.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'query($id: ID!, $n: Int!) { run(id: $id) { events(first: $n) { edges { node { payload } } } } }',
          variables: { id: runId, n: first },
        }),
      }).then(async (response) => {
        const text = await response.text();
        return { bytes: Buffer.byteLength(text), body: JSON.parse(text) };
      });
    const three = await read(3);
    expect(three.body.errors).toBeUndefined();
    const all = await read(10);
    expect(all.body.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/larger than 65536 bytes \(RUNPLANE_MAX_RESPONSE_BYTES\)/),
      extensions: { code: 'RESPONSE_TOO_LARGE' },
    });
    expect(all.bytes).toBeLessThan(65536);
  });

  test('output text counts as the JSON string it is sent as: a control character is 6 bytes there', async () => {
    const api = await startTestServer({ RUNPLANE_MAX_RESPONSE_BYTES: '65536' });
    const runId = await runWith(api);
    // 20,000 characters stored, 120,000 bytes in the response (each one written \u0001).
    const text = '\u0001'.repeat(20_000);
    const appended = await api.gql('mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename } }', {
      input: { runId, stream: 'llm', offset: 0, text, final: true },
    });
    expect(appended).toEqual({ data: { appendOutput: { __typename: 'OutputChunk' } } });
    const OUTPUT = 'query($id: ID!) { run(id: $id) { outputs { length } output(stream: "llm") { text } } }';
    await waitFor(async () => (await api.gql(OUTPUT, { id: runId })).data?.run?.outputs?.[0]?.length === 20_000, {
      what: 'the output stored',
    });
    const read = await api.gql(OUTPUT, { id: runId });
    expect(read.errors?.[0]).toMatchObject({ extensions: { code: 'RESPONSE_TOO_LARGE' } });
  });
});

describe('auth first', () => {
  const KEY = 'limits-key-0123456789abcdef';

  test('a request without a valid key is answered 401 before its body is read: no validation, no schema oracle', async () => {
    const api = await startTestServer({ RUNPLANE_API_KEYS: `${KEY}=acme` });
    const heavy = `{ ${'nosuchfield { a b c } '.repeat(800)} }`;
    for (const body of [JSON.stringify({ query: heavy }), 'this is not json at all', JSON.stringify({ query: '{ rnus { x } }' })]) {
      const response = await fetch(api.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(response.status).toBe(401);
      const text = await response.text();
      expect(text).toMatch(/An API key is required/);
      expect(text).not.toMatch(/Cannot query|Did you mean|Syntax Error|JSON/);
    }
    const wrong = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer wrong-key-0123456789abcdef' },
      body: JSON.stringify({ query: '{ rnus }' }),
    });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).not.toMatch(/Cannot query/);
    expect((await api.gql('{ __typename }', {}, { key: KEY })).data).toEqual({ __typename: 'Query' });
  });

  test('in production no suggestion is given for fields, enum literals or enum variables', async () => {
    const api = await startTestServer({ NODE_ENV: 'production', RUNPLANE_ALLOW_OPEN: 'true' });
    const answers = [
      await api.gql('{ rnus { edges { cursor } } }'),
      await api.gql('{ runs(status: RUNNIN) { edges { cursor } } }'),
      await api.gql('query($s: RunStatus) { runs(status: $s) { edges { cursor } } }', { s: 'RUNNIN' }),
    ];
    for (const answer of answers) {
      expect(answer.errors?.length, JSON.stringify(answer)).toBeGreaterThan(0);
      expect(JSON.stringify(answer)).not.toMatch(/Did you mean|RUNNING/);
    }
  });
});

describe('protocol fields and cursors', () => {
  test('an overlong subscription id closes the socket with 4400; an overlong operation name is refused', async () => {
    const api = await startTestServer();
    const socket = await rawSocket(api.url);
    socket.subscribe('x'.repeat(900_000), '{ __typename }');
    expect(await socket.closed).toEqual({ code: 4400, reason: expect.stringMatching(/at most 128 characters/) });
    const other = await rawSocket(api.url);
    other.send({ id: 'n', type: 'subscribe', payload: { query: '{ __typename }', operationName: 'o'.repeat(300) } });
    await other.until((frames) => errorsOf(frames, 'n') !== undefined, 'the refusal');
    expect(errorsOf(other.frames, 'n')?.[0]?.message).toMatch(/at most 256 characters/);
    other.close();
  });

  test.each(['seq:0x10', 'seq:1e1', 'seq:016', 'seq: 16', 'seq:+16', 'seq:16 ', 'seq:-1', 'seq:99999999999'])(
    'the cursor %s is refused, not read loosely',
    async (text) => {
      const api = await startTestServer();
      const runId = await runWith(api, [1, 2, 3]);
      const cursor = Buffer.from(text).toString('base64url');
      const answer = await api.gql('query($id: ID!, $c: String) { run(id: $id) { events(after: $c) { edges { node { seq } } } } }', {
        id: runId,
        c: cursor,
      });
      expect(answer.errors?.[0]).toMatchObject({
        message: expect.stringContaining('events.after: not a cursor of this connection'),
        extensions: { code: 'BAD_USER_INPUT' },
      });
    },
  );
});
