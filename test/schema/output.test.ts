/**
 * Live output over the API: offsets (a retry taken once, other text refused, nothing after
 * final), the size cap, how often the table is written under a fast writer, reading it back
 * (Run.outputs, Run.output) and a subscriber joining at every offset while it is written.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { outputChunkItem } from '../../src/table/codec.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const FLUSH_MS = 100;
const MAX_LENGTH = 20_000;

let api: TestServer;
let ws: Client;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_OUTPUT_FLUSH_MS: String(FLUSH_MS), RUNPLANE_MAX_OUTPUT_LENGTH: String(MAX_LENGTH) });
  ws = wsClient(api.url);
});
afterAll(async () => {
  await ws?.dispose();
});

const APPEND = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) {
    __typename
    ... on OutputChunk { offset text final durable }
    ... on OffsetConflict { length message }
    ... on ClaimLost { message }
    ... on RunNotFound { message }
  }
}`;

type Answer = { __typename: string; offset?: number; text?: string; final?: boolean; durable?: boolean; length?: number; message?: string };

async function append(input: Record<string, unknown>): Promise<Answer> {
  const answer = await api.gql(APPEND, { input: { stream: 'llm', ...input } });
  if (answer.errors) return { __typename: 'errors', message: JSON.stringify(answer.errors) };
  return answer.data.appendOutput;
}

async function stored(runId: string, stream = 'llm', afterOffset = 0) {
  const answer = await api.gql(
    'query($id: ID!, $stream: String!, $after: Int) { run(id: $id) { outputs { stream length final } output(stream: $stream, afterOffset: $after) { offset text final } } }',
    { id: runId, stream, after: afterOffset },
  );
  expect(answer.errors).toBeUndefined();
  return answer.data.run as {
    outputs: { stream: string; length: number; final: boolean }[];
    output: { offset: number; text: string; final: boolean } | null;
  };
}

describe('offsets', () => {
  test('text goes at the length; a retry is answered the same and written once; other text there is refused', async () => {
    const runId = await newRun(api);
    expect(await append({ runId, offset: 0, text: 'Hello' })).toMatchObject({ __typename: 'OutputChunk', offset: 0, text: 'Hello' });
    expect(await append({ runId, offset: 5, text: ', wörld 🙂' })).toMatchObject({ __typename: 'OutputChunk', offset: 5 });
    // The emoji is one code point: the stream is 14 long.
    expect(await append({ runId, offset: 5, text: ', wörld 🙂' })).toMatchObject({ __typename: 'OutputChunk', offset: 5 });
    const taken = await append({ runId, offset: 5, text: ', there' });
    expect(taken).toMatchObject({ __typename: 'OffsetConflict', length: 14 });
    expect(taken.message).toMatch(/holds other text/);
    expect(await append({ runId, offset: 20, text: 'x' })).toMatchObject({ __typename: 'OffsetConflict', length: 14 });
    expect(await append({ runId, offset: 14, text: '!', durable: true })).toMatchObject({ __typename: 'OutputChunk', durable: true });
    const read = await stored(runId);
    expect(read.output).toEqual({ offset: 0, text: 'Hello, wörld 🙂!', final: false });
    expect(read.outputs).toEqual([{ stream: 'llm', length: 15, final: false }]);
  });

  test('final closes the stream: later text is refused, a retry of the close is answered the same', async () => {
    const runId = await newRun(api);
    await append({ runId, offset: 0, text: 'done' });
    expect(await append({ runId, offset: 4, text: '', final: true })).toMatchObject({
      __typename: 'OutputChunk',
      final: true,
      durable: true,
    });
    expect(await append({ runId, offset: 4, text: '', final: true })).toMatchObject({ __typename: 'OutputChunk', final: true });
    const after = await append({ runId, offset: 4, text: 'more' });
    expect(after).toMatchObject({ __typename: 'OffsetConflict', length: 4 });
    expect(after.message).toMatch(/is final/);
    expect((await stored(runId)).outputs).toEqual([{ stream: 'llm', length: 4, final: true }]);
    expect((await stored(runId)).output).toEqual({ offset: 0, text: 'done', final: true });
  });

  test('bad input is refused naming the field, and nothing is written', async () => {
    const runId = await newRun(api);
    const bad = [
      [{ runId, offset: 0, text: '', final: false }, /input.text: must not be empty unless final/],
      [{ runId, offset: -1, text: 'a' }, /input.offset: must not be negative/],
      [{ runId, stream: 'has#hash', offset: 0, text: 'a' }, /input.stream/],
      [{ runId, offset: 0, text: 'lone \ud800 surrogate' }, /input.text: must be well-formed Unicode/],
    ] as const;
    for (const [input, message] of bad) expect((await append(input)).message).toMatch(message);
    expect(await append({ runId: 'no-such-run', offset: 0, text: 'a' })).toMatchObject({ __typename: 'RunNotFound' });
    expect((await stored(runId)).outputs).toEqual([]);
  });

  test('past RUNPLANE_MAX_OUTPUT_LENGTH a write is refused with LIMIT_EXCEEDED, and what came before stays', async () => {
    const runId = await newRun(api);
    await append({ runId, offset: 0, text: 'a'.repeat(MAX_LENGTH - 1) });
    const answer = await api.gql(APPEND, { input: { runId, stream: 'llm', offset: MAX_LENGTH - 1, text: 'bc' } });
    expect(answer.errors?.[0]?.extensions).toMatchObject({ code: 'LIMIT_EXCEEDED', limit: MAX_LENGTH });
    expect(answer.errors?.[0]?.message).toMatch(/RUNPLANE_MAX_OUTPUT_LENGTH/);
    expect(await append({ runId, offset: MAX_LENGTH - 1, text: 'b', durable: true })).toMatchObject({ __typename: 'OutputChunk' });
    expect((await stored(runId)).outputs[0]?.length).toBe(MAX_LENGTH);
  });
});

describe('storing', () => {
  test('a writer of 1,000 tokens a second costs at most one table write per flush interval', async () => {
    const runId = await newRun(api);
    const before = api.requests.length;
    const startedAt = Date.now();
    let offset = 0;
    const tokens = 400;
    // As fast as the API answers: well over 1,000 a second on a quiet machine, never slower than one at a time.
    for (let i = 0; i < tokens; i++) {
      const token = `t${i} `;
      const answer = await append({ runId, offset, text: token });
      expect(answer.__typename).toBe('OutputChunk');
      offset += token.length;
    }
    const elapsed = Date.now() - startedAt;
    await append({ runId, offset, text: '', final: true });
    const writes = api.requests.slice(before).filter((name) => /Put|Update|TransactWrite/.test(name)).length;
    // One write per interval the writing took (rounded up), the first chunk's and the final's.
    expect(writes).toBeLessThanOrEqual(Math.ceil(elapsed / FLUSH_MS) + 2);
    expect(writes).toBeLessThan(tokens / 4);
    expect((await stored(runId)).output?.text).toBe(Array.from({ length: tokens }, (_, i) => `t${i} `).join(''));
  });

  test('a chunk written straight into the table reaches subscribers and readers', async () => {
    const runId = await newRun(api);
    const sub = subscribeWs<{ offset: number; text: string }>(
      ws,
      'subscription($runId: ID!) { runOutput(runId: $runId, stream: "tool") { offset text final } }',
      { runId },
      'runOutput',
    );
    const { server } = api;
    await server.clients.doc.send(
      new PutCommand({
        TableName: api.table,
        Item: outputChunkItem(OPEN_TENANT, { runId, stream: 'tool', offset: 0, text: 'from another writer', final: false }, new Date()),
      }),
    );
    const items = await sub.until(1);
    expect(items.map((c) => c.text).join('')).toBe('from another writer');
    sub.stop();
  });
});

describe('listing', () => {
  test('Run.outputs lists a stream whose first text is accepted and not stored yet, with its length', async () => {
    // Text waits a minute before it is stored here.
    const slow = await startTestServer({ RUNPLANE_OUTPUT_FLUSH_MS: '60000' });
    const runId = await newRun(slow);
    await slow.gql(APPEND, { input: { runId, stream: 'zeta', offset: 0, text: 'abc' } });
    await slow.gql(APPEND, { input: { runId, stream: 'alpha', offset: 0, text: 'stored.', final: true, durable: true } });
    const listed = await slow.gql('query($id: ID!) { run(id: $id) { outputs { stream length final } } }', { id: runId });
    expect(listed.data.run.outputs).toEqual([
      { stream: 'alpha', length: 7, final: true },
      { stream: 'zeta', length: 3, final: false },
    ]);
  });
});

describe('reading', () => {
  test('a subscriber resuming past the end of a final stream is refused, not left waiting; at its end it completes', async () => {
    const runId = await newRun(api);
    await api.gql(APPEND, { input: { runId, stream: 'llm', offset: 0, text: 'done.', final: true, durable: true } });
    const query =
      'subscription($runId: ID!, $from: Int) { runOutput(runId: $runId, stream: "llm", afterOffset: $from) { offset text final } }';
    const past = subscribeWs(ws, query, { runId, from: 6 }, 'runOutput');
    await waitFor(() => past.errors.length > 0, { what: 'the refusal' });
    expect(JSON.stringify(past.errors)).toMatch(/afterOffset: must be at most 5: the stream is final at 5 code points/);
    const resumedSse = await fetch(api.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'last-event-id': '99' },
      body: JSON.stringify({ query, variables: { runId } }),
    });
    expect(await resumedSse.text()).toMatch(/Last-Event-ID: must be at most 5/);
    const atEnd = subscribeWs<{ final: boolean }>(ws, query, { runId, from: 5 }, 'runOutput');
    await waitFor(() => atEnd.completeReceived, { what: 'the subscription at the end to complete' });
    expect(atEnd.items).toEqual([{ offset: 5, text: '', final: true }]);
  });

  test('a subscriber joining at any offset of a 10,000-character stream while it is written gets exactly the text from there', async () => {
    const runId = await newRun(api);
    const text = Array.from({ length: 10_000 }, (_, i) => String.fromCodePoint(i % 97 === 0 ? 0x1f642 : 0x41 + (i % 26))).join('');
    const points = [...text];
    const readers: { from: number; sub: ReturnType<typeof subscribeWs<{ offset: number; text: string; final: boolean }>> }[] = [];
    let offset = 0;
    const pieces = 100;
    const size = Math.ceil(points.length / pieces);
    const query =
      'subscription($runId: ID!, $from: Int) { runOutput(runId: $runId, stream: "llm", afterOffset: $from) { offset text final } }';
    for (let i = 0; i < pieces; i++) {
      const piece = points.slice(i * size, (i + 1) * size).join('');
      if (!piece) break;
      // Before each write a reader joins somewhere in what is written so far (spread over it,
      // emoji included), every tenth at the live end; over both transports.
      const froms = [(i * 7_919) % (offset + 1), ...(i % 10 === 0 ? [offset] : [])];
      for (const from of froms)
        readers.push({
          from,
          sub:
            i % 2 === 0 ? subscribeWs(ws, query, { runId, from }, 'runOutput') : subscribeSse(api.url, query, { runId, from }, 'runOutput'),
        });
      const last = (i + 1) * size >= points.length;
      expect(await append({ runId, offset, text: piece, final: last })).toMatchObject({ __typename: 'OutputChunk' });
      offset += [...piece].length;
    }
    for (const { from, sub } of readers) {
      await waitFor(() => sub.items.some((c) => c.final) || sub.errors.length > 0, { what: `the reader from ${from} to reach the end` });
      expect(sub.errors).toEqual([]);
      // Each chunk starts where the one before ended: no gap, no overlap.
      let at = from;
      for (const chunk of sub.items) {
        expect(chunk.offset).toBe(at);
        at += [...chunk.text].length;
      }
      expect(sub.items.map((c) => c.text).join('')).toBe(points.slice(from).join(''));
      await waitFor(() => sub.completed, { what: 'the subscription to complete after the final text' });
    }
  });
});
