/**
 * The client's SSE framing: line ends of every kind, a BOM, events split across reads at every
 * byte, comments and retry lines, and the bound on what it holds for one event. Malformed and
 * unusual framings come from a small HTTP server here; the read boundaries are cut into the
 * real responses by the fetch the client is given. The transport against Runplane's own server
 * is at the end.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse } from '@0no-co/graphql.web';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RunplaneError } from '../../packages/client/src/errors.ts';
import type { Document } from '../../packages/client/src/graphql.ts';
import { MAX_EVENT_CHARS, sseTransport } from '../../packages/client/src/sse.ts';
import type { StreamResult } from '../../packages/client/src/transport.ts';
import { collect, testClient } from '../support/client.ts';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

/** What the framing server answers next: a body sent whole, or a writer of its own. */
let answer: string | Buffer | ((res: ServerResponse) => void) = '';
/** Responses the framing server has seen closed (the client let go of them). */
let closed = 0;
const framing = createServer((req, res) => {
  req.resume();
  res.on('close', () => closed++);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (typeof answer === 'function') answer(res);
  else res.end(answer);
});
let url = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => framing.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(framing.address() as AddressInfo).port}/graphql`;
});
afterAll(async () => {
  framing.closeAllConnections();
  await new Promise<void>((resolve) => framing.close(() => resolve()));
});

/** Cuts the response body so that each read ends at one of `cuts` (absolute byte offsets); 'bytes': one byte a read; 'whole': one read. */
type Reads = number[] | 'bytes' | 'whole';
function cutting(reads: Reads): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.body) return response;
    let body: ReadableStream<Uint8Array>;
    if (reads === 'whole') {
      const all = new Uint8Array(await response.arrayBuffer());
      body = new ReadableStream({
        start(controller) {
          controller.enqueue(all);
          controller.close();
        },
      });
    } else {
      let offset = 0;
      body = response.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            let from = 0;
            for (let i = 1; i <= chunk.length; i++) {
              if (i === chunk.length || reads === 'bytes' || reads.includes(offset + i)) {
                controller.enqueue(chunk.subarray(from, i));
                from = i;
              }
            }
            offset += chunk.length;
          },
        }),
      );
    }
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

const DOCUMENT = parse('subscription { tick }') as unknown as Document;

/** Subscribes through the SSE transport and reads to the end: the results, then how it ended. */
async function readAll(reads: Reads = [], stop = new AbortController()) {
  const subscription = sseTransport({ url, headers: {}, fetch: cutting(reads) }).subscribe({
    document: DOCUMENT,
    variables: {},
    signal: stop.signal,
    onConnected: () => undefined,
    policy: 'backlog',
  });
  const results: StreamResult[] = [];
  try {
    for (;;) {
      const step = await subscription.next();
      if (step.done) return { results, ended: step.value };
      results.push(step.value);
    }
  } finally {
    await subscription.return();
  }
}

const failure = async (reads: Reads = []) => {
  try {
    await readAll(reads);
  } catch (err) {
    return err as RunplaneError;
  }
  throw new Error('expected the subscription to fail');
};

/** Two events (the second's data over two lines, with characters of two, three and four bytes) and complete. */
const framed = (eol: string) =>
  [
    ':',
    'retry: 1000',
    '',
    'event: next',
    'id: 7',
    'data: {"data":{"tick":1}}',
    '',
    'event: next',
    'data: {"data":',
    'data: {"tick":"é€😀"}}',
    '',
    'event: complete',
    'data:',
    '',
    '',
  ].join(eol);
const expected = { results: [{ data: { tick: 1 }, id: '7' }, { data: { tick: 'é€😀' } }], ended: 'complete' };

describe('line ends and the BOM', () => {
  test.each([
    ['LF', '\n'],
    ['CR', '\r'],
    ['CRLF', '\r\n'],
  ])('%s line ends', async (_, eol) => {
    answer = framed(eol);
    expect(await readAll()).toEqual(expected);
  });

  test('line ends mixed in one stream', async () => {
    const lines = framed('\n').split('\n');
    const ends = ['\n', '\r', '\r\n'];
    answer = lines.map((line, i) => line + (i < lines.length - 1 ? ends[i % 3] : '')).join('');
    expect(await readAll()).toEqual(expected);
  });

  test('a BOM at the start of the body is dropped; anywhere else it is part of the line', async () => {
    answer = `\uFEFF${framed('\r\n')}`;
    expect(await readAll()).toEqual(expected);
    // After the first line a BOM is a character of the field name: `\uFEFFevent` is not `event`, so that event is not a `next`.
    answer = `:\n\n\uFEFFevent: next\ndata: {"data":{"tick":0}}\n\n${framed('\n')}`;
    expect(await readAll()).toEqual(expected);
  });
});

describe('an event split across reads', () => {
  const bodies = { LF: framed('\n'), CR: framed('\r'), 'CRLF with a BOM': `\uFEFF${framed('\r\n')}` };

  test.each(Object.entries(bodies))('%s: cut at every byte, one cut a time', async (_, body) => {
    answer = body;
    const length = Buffer.byteLength(body);
    for (let cut = 1; cut < length; cut++) {
      expect(await readAll([cut]), `cut at byte ${cut}`).toEqual(expected);
    }
  });

  test.each(Object.entries(bodies))('%s: one byte a read', async (_, body) => {
    answer = body;
    expect(await readAll('bytes')).toEqual(expected);
  });
});

describe('what is not an event of GraphQL over SSE', () => {
  test('comments, retry lines (valid or not), unknown fields, events of other types and events without data are passed over', async () => {
    answer = [
      ': a comment',
      ':',
      'retry: 5000',
      'retry: soon',
      'unknown: field',
      'justaname',
      '',
      'event: message',
      'data: {"data":{"tick":-1}}',
      '',
      'data: {"data":{"tick":-2}}',
      '',
      'event: next',
      '',
      'event: next',
      ': a comment inside an event',
      'id: 8',
      'retry: 10',
      'data: {"data":{"tick":1}}',
      '',
      'event: complete',
      'data:',
      '',
      'event: next',
      'data: {"data":{"tick":2}}',
      '',
      '',
    ].join('\n');
    expect(await readAll()).toEqual({ results: [{ data: { tick: 1 }, id: '8' }], ended: 'complete' });
  });

  test('a next event whose data is not JSON: a BAD_RESPONSE naming it', async () => {
    answer = 'event: next\ndata: {"data":\n\n';
    const err = await failure();
    expect(err).toBeInstanceOf(RunplaneError);
    expect(err).toMatchObject({ code: 'BAD_RESPONSE', message: expect.stringMatching(/SSE next event whose data is not JSON/) });
  });

  test('a stream that ends without complete is a network failure (the client comes back), not an end', async () => {
    answer = 'event: next\ndata: {"data":{"tick":1}}\n\nevent: complete\n';
    expect(await failure()).toMatchObject({ code: 'NETWORK_ERROR', retryable: true });
  });
});

describe('the bound on one event', () => {
  /** A next event's data of exactly `chars` characters. */
  const payload = (chars: number) => `{"data":{"tick":"${'x'.repeat(chars - 20)}"}}`;

  test('an event just inside the bound is handed out', async () => {
    // "data: " and the value are held until the line ends.
    answer = `event: next\ndata: ${payload(MAX_EVENT_CHARS - 6)}\n\nevent: complete\ndata:\n\n`;
    const { results, ended } = await readAll();
    expect(String(results[0]?.data.tick).length).toBe(MAX_EVENT_CHARS - 6 - 20);
    expect(ended).toBe('complete');
  });

  test.each([
    ['one line that never ends', (res: ServerResponse) => res.write(`event: next\ndata: ${'x'.repeat(MAX_EVENT_CHARS)}`)],
    [
      'data lines without the blank line that ends the event',
      (res: ServerResponse) => {
        const line = `data: ${'x'.repeat(64 * 1024)}\n`;
        res.write('event: next\n');
        for (let sent = 0; sent <= MAX_EVENT_CHARS; sent += line.length) res.write(line);
      },
    ],
  ])('%s: RESPONSE_TOO_LARGE, and the response is let go while the server still holds it open', async (_, write) => {
    const before = closed;
    answer = (res) => {
      res.write('event: next\ndata: {"data":{"tick":1}}\n\n');
      write(res);
    };
    const stop = new AbortController();
    const subscription = sseTransport({ url, headers: {}, fetch }).subscribe({
      document: DOCUMENT,
      variables: {},
      signal: stop.signal,
      onConnected: () => undefined,
      policy: 'backlog',
    });
    // The event before the oversized one still comes.
    expect(await subscription.next()).toEqual({ done: false, value: { data: { tick: 1 } } });
    const err = await subscription.next().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RunplaneError);
    expect(err).toMatchObject({
      code: 'RESPONSE_TOO_LARGE',
      retryable: false,
      message: expect.stringContaining(`larger than the client takes (${MAX_EVENT_CHARS} characters)`),
    });
    await waitFor(() => closed > before, { what: 'the client to let the response go' });
    await subscription.return();
  });

  test('an oversized event that arrives whole in one read', async () => {
    answer = `event: next\ndata: ${payload(MAX_EVENT_CHARS + 1)}\n\nevent: complete\ndata:\n\n`;
    expect(await failure('whole')).toMatchObject({ code: 'RESPONSE_TOO_LARGE' });
  });
});

describe("against Runplane's server", () => {
  test('runEvents over SSE read one byte a read: every event once, in order, whole', async () => {
    const api = await startTestServer();
    const runId = await newRun(api);
    for (let i = 0; i < 3; i++) await appendEvent(api, runId, { type: 'step', payload: { note: 'é€😀' } });
    const { client } = testClient(api.url, { transport: 'sse', fetch: cutting('bytes') });
    const stop = new AbortController();
    const seen = collect(client.runEvents(runId, { afterSeq: 0, signal: stop.signal }));
    await waitFor(() => seen.items.length >= 3, { what: 'the history' });
    for (let i = 0; i < 2; i++) await appendEvent(api, runId, { type: 'step', payload: { note: 'é€😀' } });
    await waitFor(() => seen.items.length >= 5, { what: 'the live events' });
    stop.abort();
    await seen.done;
    expect(seen.failure).toBeUndefined();
    expect(seen.items.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.items.map((e) => e.payload)).toEqual(Array(5).fill({ note: 'é€😀' }));
  });
});
