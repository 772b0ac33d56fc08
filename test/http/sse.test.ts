/**
 * GraphQL over SSE as stock clients use it: frames carry ids, Last-Event-ID resumes after the
 * last one a client got (EventSource sends it by itself), EventSource's GET needs no CSRF
 * header, and graphql-sse's single connection mode is refused saying so.
 */
import { createClient } from 'graphql-sse';
import { beforeAll, describe, expect, test } from 'vitest';
import { streamEventId } from '../../src/http/subscriptions/sse.ts';
import { uniqueName } from '../support/aws.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

interface Frame {
  event?: string;
  id?: string;
  data?: { data?: Record<string, Record<string, unknown>>; errors?: unknown[] };
}

/** Opens an SSE request and collects its frames as they come (raw: every field of each frame). */
function sse(init: { method?: 'GET' | 'POST'; query: string; variables?: Record<string, unknown>; headers?: Record<string, string> }) {
  const abort = new AbortController();
  const frames: Frame[] = [];
  const url = new URL(api.url);
  if (init.method === 'GET') {
    url.searchParams.set('query', init.query);
    url.searchParams.set('variables', JSON.stringify(init.variables ?? {}));
  }
  const done = (async () => {
    const response = await fetch(url, {
      method: init.method ?? 'POST',
      headers: { accept: 'text/event-stream', ...(init.method === 'GET' ? {} : { 'content-type': 'application/json' }), ...init.headers },
      body: init.method === 'GET' ? undefined : JSON.stringify({ query: init.query, variables: init.variables }),
      signal: abort.signal,
    });
    if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame: Frame = {};
        for (const line of block.split('\n')) {
          const [field, ...rest] = line.split(':');
          const value = rest.join(':').replace(/^ /, '');
          if (field === 'event') frame.event = value;
          if (field === 'id') frame.id = value;
          if (field === 'data' && value) frame.data = JSON.parse(value);
        }
        if (frame.event) frames.push(frame);
      }
    }
  })().catch((err) => {
    if (!abort.signal.aborted) throw err;
  });
  return { frames, done, stop: () => abort.abort() };
}

const runWith = (events: number) => newRun(api, { budgetCap: 100, events });
const append = (runId: string) =>
  api.gql('mutation($id: ID!) { appendEvent(input: { runId: $id, type: "step" }) { __typename } }', { id: runId });
const RUN_EVENTS = 'subscription($runId: ID!, $afterSeq: Int) { runEvents(runId: $runId, afterSeq: $afterSeq) { seq } }';

describe('event ids and Last-Event-ID', () => {
  test('each runEvents frame carries id: <seq>; Last-Event-ID resumes after it, whatever afterSeq is repeated', async () => {
    const runId = await runWith(5);
    const first = sse({ query: RUN_EVENTS, variables: { runId, afterSeq: 0 } });
    await waitFor(() => first.frames.length >= 5, { what: 'five frames' });
    expect(first.frames.map((f) => [f.event, f.id, f.data?.data?.runEvents?.seq])).toEqual(
      [1, 2, 3, 4, 5].map((seq) => ['next', String(seq), seq]),
    );
    first.stop();
    // A client that got up to 3 reconnects repeating its original afterSeq: 0.
    const resumed = sse({ query: RUN_EVENTS, variables: { runId, afterSeq: 0 }, headers: { 'last-event-id': '3' } });
    await append(runId);
    await waitFor(() => resumed.frames.length >= 3, { what: 'the resumed frames' });
    expect(resumed.frames.map((f) => f.id)).toEqual(['4', '5', '6']);
    resumed.stop();
  });

  test('a Last-Event-ID that is not a seq of this API is ignored, not an error', async () => {
    const runId = await runWith(2);
    const stream = sse({ query: RUN_EVENTS, variables: { runId, afterSeq: 1 }, headers: { 'last-event-id': 'x; DROP' } });
    await waitFor(() => stream.frames.length >= 1, { what: 'a frame' });
    expect(stream.frames[0]?.id).toBe('2');
    stream.stop();
  });

  test('runChanged frames carry <version>.<budget version>; a client resuming with the current one is not sent it again', async () => {
    const runId = await runWith(0);
    const query = 'subscription($runId: ID!) { runChanged(runId: $runId) { version budget { spent version } } }';
    const first = sse({ query, variables: { runId } });
    await waitFor(() => first.frames.length >= 1, { what: 'the current state' });
    expect(first.frames[0]?.id).toBe('1.1');
    first.stop();
    const resumed = sse({ query, variables: { runId }, headers: { 'last-event-id': '1.1' } });
    await api.gql('mutation($id: ID!) { chargeBudget(input: { runId: $id, amount: 3 }) { __typename } }', { id: runId });
    await waitFor(() => resumed.frames.length >= 1, { what: 'the change' });
    expect(resumed.frames.map((f) => f.id)).toEqual(['1.2']);
    expect(resumed.frames[0]?.data?.data?.runChanged).toEqual({ version: 1, budget: { spent: 3, version: 2 } });
    resumed.stop();
  });

  test('ids follow the rule: a seq, none for a late event, versions for runs and leases', () => {
    const event = { runId: 'r', seq: 7, type: 't', payload: null, createdAt: new Date() };
    expect(streamEventId(event)).toBe('7');
    expect(streamEventId({ ...event, late: true })).toBeUndefined();
    expect(streamEventId({ run: { version: 4 }, budget: { version: 9 } })).toBe('4.9');
    expect(streamEventId({ unitId: 'u', version: 3 })).toBe('3');
  });
});

describe('stock SSE clients', () => {
  test('an EventSource-style GET subscribes without the CSRF header (which EventSource cannot send)', async () => {
    const runId = await runWith(2);
    const stream = sse({ method: 'GET', query: RUN_EVENTS, variables: { runId, afterSeq: 0 } });
    await waitFor(() => stream.frames.length >= 2, { what: 'the frames' });
    expect(stream.frames.map((f) => f.id)).toEqual(['1', '2']);
    stream.stop();
    // Other GETs still need it.
    const query = new URL(api.url);
    query.searchParams.set('query', '{ __typename }');
    expect((await fetch(query)).status).toBe(403);
  });

  test("graphql-sse's single connection mode is refused with a 4xx that says so; its default mode works", async () => {
    const reserve = await fetch(api.url, { method: 'PUT' });
    expect(reserve.status).toBe(405);
    expect(await reserve.text()).toMatch(/single connection mode is not supported: use its distinct connections mode/);
    const single = createClient({ url: api.url, singleConnection: true, retryAttempts: 0 });
    const refused = await new Promise<unknown>((resolve) => {
      single.subscribe({ query: '{ __typename }' }, { next: () => undefined, error: resolve, complete: () => resolve(undefined) });
    });
    expect(String((refused as { message?: string })?.message ?? refused)).toMatch(/405/);
    single.dispose();

    const runId = await runWith(1);
    const distinct = createClient({ url: api.url });
    const seqs: number[] = [];
    const dispose = distinct.subscribe<{ runEvents: { seq: number } }>(
      { query: RUN_EVENTS, variables: { runId, afterSeq: 0 } },
      { next: ({ data }) => data && seqs.push(data.runEvents.seq), error: () => undefined, complete: () => undefined },
    );
    await waitFor(() => seqs.length >= 1, { what: 'the event over graphql-sse' });
    expect(seqs).toEqual([1]);
    dispose();
    distinct.dispose();
  });
});

describe('identities for normalized caches', () => {
  test('Budget, Lease and Event have ids that stay the same across reads and changes', async () => {
    const runId = await runWith(1);
    const unitId = uniqueName('unit');
    await api.gql('mutation($u: ID!) { acquireLease(input: { unitId: $u, owner: "w", ttlSeconds: 60 }) { __typename } }', { u: unitId });
    const read = async () =>
      (
        await api.gql(
          'query($id: ID!, $u: ID!) { run(id: $id, consistent: true) { id budget { id spent } events(first: 1) { edges { node { id } } } } lease(unitId: $u) { id token } }',
          { id: runId, u: unitId },
        )
      ).data;
    const before = await read();
    await api.gql('mutation($id: ID!) { chargeBudget(input: { runId: $id, amount: 1 }) { __typename } }', { id: runId });
    const after = await read();
    expect(before.run.budget.id).toBe(runId);
    expect(after.run.budget).toEqual({ id: runId, spent: 1 });
    expect(after.run.events.edges[0].node.id).toBe(`${runId}:1`);
    expect(after.lease.id).toBe(unitId);
    expect(after.lease.id).toBe(before.lease.id);
  });
});
