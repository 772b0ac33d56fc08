/**
 * Live output's bounds, reached: a subscriber that stops reading holds at most its send
 * buffer and then gets the text in fewer, larger chunks; a stream whose chunks DynamoDB does
 * not take holds at most its backlog and then refuses writes, retryably, until it drains.
 * On an engine of this file's own (faults are injected into it).
 */

import type { Engine } from '@runplane/engine';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Change } from '../../src/domain/change.ts';
import { OutputBacklog } from '../../src/domain/errors.ts';
import type { OutputChunk } from '../../src/domain/output.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { SendBuffer } from '../../src/lib/send-buffer.ts';
import { outputPuts } from '../../src/store/outputs/puts.ts';
import { createOutputWriter } from '../../src/store/outputs/writer.ts';
import { uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const APPEND = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) { __typename ... on OutputChunk { offset durable } ... on Error { message } }
}`;

describe.skipIf(onlyEmbedded)('live output bounds', () => {
  let engine: Engine;
  let api: TestServer;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    api = await startTestServer({ endpoint: engine.endpoint, env: { RUNPLANE_OUTPUT_FLUSH_MS: '50' } });
  });
  afterAll(async () => {
    await api.server.stop();
    await engine.close();
  });

  const append = (input: Record<string, unknown>) => api.gql(APPEND, { input: { stream: 'llm', ...input } });

  test('a subscriber that stops reading holds at most its send buffer, then gets every character once, in fewer larger chunks', async () => {
    const runId = await newRun(api);
    const sendBuffer = new SendBuffer(64 * 1024);
    const feed = api.server.live.runOutput({ tenant: OPEN_TENANT, runId, stream: 'llm', afterOffset: 0, sendBuffer });
    const first = feed.next();
    const pieces = Array.from({ length: 96 }, (_, i) => `${String(i).padStart(4, '0')}${'·'.repeat(8 * 1024 - 4)}`);
    let offset = 0;
    let peak = 0;
    for (const piece of pieces) {
      expect((await append({ runId, offset, text: piece })).data?.appendOutput.__typename).toBe('OutputChunk');
      offset += piece.length;
      peak = Math.max(peak, sendBuffer.bytes);
    }
    expect((await append({ runId, offset, text: '', final: true, durable: true })).data?.appendOutput).toMatchObject({ durable: true });
    // 1.5 MB written while the reader took one chunk: what it was handed and what waits, within its buffer.
    expect(peak).toBeLessThanOrEqual(sendBuffer.limit);
    expect(peak).toBeGreaterThan(0);

    const chunks: OutputChunk[] = [(await first).value];
    for (;;) {
      const next = await feed.next();
      if (next.done) break;
      chunks.push(next.value);
    }
    expect(chunks.map((c) => c.text).join('') === pieces.join(''), 'the text joined').toBe(true);
    let at = 0;
    for (const chunk of chunks) {
      expect(chunk.offset).toBe(at);
      at += [...chunk.text].length;
    }
    expect(chunks.at(-1)?.final).toBe(true);
    expect(chunks.length).toBeLessThan(pieces.length / 4);
    expect(sendBuffer.bytes).toBe(0);
  });

  test('a reader whose written frames fill its send buffer (its socket stopped taking them) reads on from the table once they drain', async () => {
    const runId = await newRun(api);
    const sendBuffer = new SendBuffer(64 * 1024);
    const feed = api.server.live.runOutput({ tenant: OPEN_TENANT, runId, stream: 'llm', afterOffset: 0, sendBuffer });
    // As socket delivery does: each chunk's frame holds its bytes until the socket has taken it.
    // First the socket takes nothing: the feed hands over what fits, then falls behind.
    let socketReads = false;
    const unread: number[] = [];
    const received: OutputChunk[] = [];
    let ended = false;
    void (async () => {
      for (;;) {
        const next = await feed.next();
        if (next.done) break;
        received.push(next.value);
        const bytes = Buffer.byteLength(next.value.text);
        sendBuffer.hold(bytes);
        if (socketReads) sendBuffer.release(bytes);
        else unread.push(bytes);
      }
      ended = true;
    })();
    const pieces = Array.from({ length: 48 }, (_, i) => `${String(i).padStart(4, '0')}${'·'.repeat(8 * 1024 - 4)}`);
    let offset = 0;
    for (const piece of pieces) {
      expect((await append({ runId, offset, text: piece })).data?.appendOutput.__typename).toBe('OutputChunk');
      offset += piece.length;
    }
    expect((await append({ runId, offset, text: '', final: true, durable: true })).data?.appendOutput).toMatchObject({ durable: true });
    await waitFor(async () => !sendBuffer.fits(8 * 1024) && received.length > 0, { what: 'the frames to fill the send buffer' });
    expect(ended).toBe(false);
    // The socket takes its frames again: the feed reads the rest from the table, to the end.
    socketReads = true;
    sendBuffer.release(unread.splice(0).reduce((sum, bytes) => sum + bytes, 0));
    await waitFor(async () => ended, { what: 'the feed to hand over the rest and end' });
    expect(received.map((c) => c.text).join('') === pieces.join(''), 'the text joined').toBe(true);
    expect(received.at(-1)?.final).toBe(true);
  });

  test('a stream DynamoDB does not take holds at most its backlog, refusing writes retryably, and stores it all once it drains', async () => {
    const runId = await newRun(api);
    const piece = 'x'.repeat(64 * 1024);
    let offset = 0;
    let refused: { code?: unknown; retryable?: unknown; message: string } | undefined;
    {
      using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], error: 'InternalServerError' });
      for (let i = 0; i < 64 && !refused; i++) {
        const answer = await append({ runId, offset, text: piece });
        if (answer.errors) refused = { ...answer.errors[0]?.extensions, message: answer.errors[0]?.message ?? '' };
        else offset += piece.length;
      }
      expect(refused).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
      expect(refused?.message).toMatch(/llm/);
      // The backlog's bound (1 MiB): reached, not exceeded by more than the write that reached it.
      expect(offset).toBeGreaterThanOrEqual(1024 * 1024);
      expect(api.server.output.stats().waitingBytes).toBeLessThanOrEqual(1024 * 1024 + piece.length);
    }
    // DynamoDB takes writes again: the waiting text is stored, and the stream goes on.
    await waitFor(() => api.server.output.stats().waitingBytes === 0, { what: 'the backlog to be stored', timeoutMs: 60_000 });
    expect((await append({ runId, offset, text: 'end', final: true, durable: true })).data?.appendOutput).toMatchObject({ durable: true });
    const answer = await api.gql('query($id: ID!) { run(id: $id) { outputs { length final } } }', { id: runId });
    expect(answer.data.run.outputs).toEqual([{ length: offset + 3, final: true }]);
  });

  /** A writer of the server's own store and live fan-out. */
  const writerOptions = {
    get store() {
      return api.server.stores.outputs;
    },
    claimOf: async () => null,
    watchRun: () => () => undefined,
    publish: (change: Change) => api.server.live.publish(change),
    flushMs: 50,
    flushBytes: 16 * 1024,
    maxLength: 1_000_000,
    maxStreamsPerRun: 64,
    log: silentLogger,
  };
  /** ... with bounds small enough to reach. */
  const smallWriter = (bounds: { maxStreams?: number; maxWaitingBytes?: number; tenantShare?: number; maxStreamsPerRun?: number }) =>
    createOutputWriter({ ...writerOptions, ...bounds });
  const write = (writer: ReturnType<typeof smallWriter>, runId: string, stream: string, offset: number, text: string, durable = false) =>
    writer.append({ tenant: OPEN_TENANT, runId, stream, offset, text, final: false, durable });

  test('the writer holds at most maxStreams streams: idle ones are forgotten and read again from the table when written', async () => {
    const runId = await newRun(api);
    const writer = smallWriter({ maxStreams: 4 });
    for (let i = 0; i < 10; i++) {
      await write(writer, runId, `s${i}`, 0, `stream ${i} `, true);
      expect(writer.stats().streams).toBeLessThanOrEqual(4);
    }
    // s0 was forgotten: its length comes from the table, a retry of its text is known, and it goes on.
    expect((await write(writer, runId, 's0', 0, 'stream 0 ')).durable).toBe(true);
    await expect(write(writer, runId, 's0', 0, 'other')).rejects.toMatchObject({ length: 9 });
    expect((await write(writer, runId, 's0', 9, 'more', true)).durable).toBe(true);
    expect(writer.stats().streams).toBeLessThanOrEqual(4);
  });

  test('with every stream held waiting on DynamoDB, a new stream is refused retryably; so is text past the total waiting bound', async () => {
    const runId = await newRun(api);
    // One tenant may take it all here: the server's total is what this reaches.
    const writer = smallWriter({ maxStreams: 2, maxWaitingBytes: 100 * 1024, tenantShare: 1 });
    {
      using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], error: 'InternalServerError' });
      await write(writer, runId, 'a', 0, 'x'.repeat(60 * 1024));
      await write(writer, runId, 'b', 0, 'y'.repeat(60 * 1024));
      await expect(write(writer, runId, 'c', 0, 'z')).rejects.toBeInstanceOf(OutputBacklog);
      // 120 KB wait in all, past the 100 KB bound: more text is refused too, retryably.
      await expect(write(writer, runId, 'a', 60 * 1024, 'x')).rejects.toBeInstanceOf(OutputBacklog);
      expect(writer.stats()).toEqual({ streams: 2, waitingBytes: 120 * 1024 });
    }
    await waitFor(() => writer.stats().waitingBytes === 0, { what: 'the waiting text to be stored', timeoutMs: 60_000 });
    expect((await write(writer, runId, 'c', 0, 'z', true)).durable).toBe(true);
    expect((await write(writer, runId, 'a', 60 * 1024, 'x', true)).durable).toBe(true);
  });

  test('one tenant at its share of the waiting text is refused retryably; another tenant still writes', async () => {
    const writer = smallWriter({ maxStreams: 100, maxWaitingBytes: 400 * 1024 });
    const hogRun = await newRun(api);
    const calmRun = uniqueName('run');
    await api.server.stores.runs.create({ tenant: 'calm', id: calmRun, task: 't', budgetCap: 1, eventShards: 1 });
    {
      using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], error: 'InternalServerError' });
      let refused: unknown;
      for (let i = 0; i < 12 && !refused; i++)
        await write(writer, hogRun, `s${i}`, 0, 'x'.repeat(40 * 1024)).catch((err) => {
          refused = err;
        });
      expect(refused).toBeInstanceOf(OutputBacklog);
      expect(refused).toMatchObject({ full: 'tenant' });
      // The hog holds its share (and one write past it), not the server's whole backlog.
      expect(writer.waitingOfTenant(OPEN_TENANT)).toBeLessThanOrEqual(100 * 1024 + 40 * 1024);
      const calm = await writer.append({ tenant: 'calm', runId: calmRun, stream: 'llm', offset: 0, text: 'still here', final: false });
      expect(calm.chunk).toMatchObject({ offset: 0, text: 'still here' });
    }
    await waitFor(() => writer.stats().waitingBytes === 0, { what: 'the waiting text to be stored', timeoutMs: 60_000 });
  });

  test('one tenant keeping its share of the held streams busy is refused a new one; another tenant still gets one', async () => {
    const writer = smallWriter({ maxStreams: 8 });
    const hogRun = await newRun(api);
    const calmRun = uniqueName('run');
    await api.server.stores.runs.create({ tenant: 'calm', id: calmRun, task: 't', budgetCap: 1, eventShards: 1 });
    {
      using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], error: 'InternalServerError' });
      await write(writer, hogRun, 'a', 0, 'x');
      await write(writer, hogRun, 'b', 0, 'x');
      await expect(write(writer, hogRun, 'c', 0, 'x')).rejects.toMatchObject({ full: 'tenant' });
      const calm = await writer.append({ tenant: 'calm', runId: calmRun, stream: 'llm', offset: 0, text: 'room', final: false });
      expect(calm.chunk.text).toBe('room');
    }
    await waitFor(() => writer.stats().waitingBytes === 0, { what: 'the waiting text to be stored', timeoutMs: 60_000 });
  });

  test("one tenant's many streams are stored two chunks at a time; another tenant's chunk is stored meanwhile, not after them", async () => {
    const puts = outputPuts();
    const writer = createOutputWriter({ ...writerOptions, puts });
    const hogRun = await newRun(api);
    const calmRun = uniqueName('run');
    await api.server.stores.runs.create({ tenant: 'calm', id: calmRun, task: 't', budgetCap: 1, eventShards: 1 });
    let peak = 0;
    let hogWaitingWhenCalmStored = 0;
    {
      // Every put takes a while: the hog's eight flushes (each over flushBytes) would all be out at once.
      using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], latencyMs: 200 });
      for (let i = 0; i < 8; i++) await write(writer, hogRun, `s${i}`, 0, 'x'.repeat(20 * 1024));
      const calm = writer.append({ tenant: 'calm', runId: calmRun, stream: 'llm', offset: 0, text: 'mine', final: false, durable: true });
      void calm.then(() => {
        hogWaitingWhenCalmStored = writer.waitingOfTenant(OPEN_TENANT);
      });
      await waitFor(
        () => {
          peak = Math.max(peak, puts.inFlightOf(OPEN_TENANT));
          return writer.waitingOfTenant(OPEN_TENANT) === 0;
        },
        { what: "the hog's text to be stored", timeoutMs: 60_000 },
      );
      expect((await calm).durable).toBe(true);
    }
    expect(peak).toBe(2);
    expect(hogWaitingWhenCalmStored).toBeGreaterThan(0);
    expect(puts.inFlightOf()).toBe(0);
  });

  test('a graceful stop stores every waiting stream at once, not two at a time', async () => {
    const puts = outputPuts();
    const writer = createOutputWriter({ ...writerOptions, puts });
    const runId = await newRun(api);
    // A put takes a second: eight streams stored two at a time would take four.
    using _ = engine.faults.inject({ operations: ['PutItem', 'TransactWriteItems'], latencyMs: 1_000 });
    for (let i = 0; i < 8; i++) await write(writer, runId, `s${i}`, 0, 'x'.repeat(20 * 1024));
    expect(puts.inFlightOf(OPEN_TENANT)).toBe(2);
    const started = performance.now();
    await writer.flushAll();
    expect(writer.stats().waitingBytes).toBe(0);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  test('a fenced write whose claim cannot be read fails, and leaves no watch on its run behind', async () => {
    const runId = await newRun(api);
    let watching = 0;
    const writer = createOutputWriter({
      store: api.server.stores.outputs,
      claimOf: async () => {
        throw new Error('DynamoDB is unreachable');
      },
      watchRun: () => {
        watching++;
        return () => {
          watching--;
        };
      },
      publish: (change) => api.server.live.publish(change),
      flushMs: 50,
      flushBytes: 16 * 1024,
      maxLength: 1_000_000,
      maxStreamsPerRun: 64,
      log: silentLogger,
    });
    for (let i = 0; i < 3; i++) {
      await expect(
        writer.append({ tenant: OPEN_TENANT, runId, stream: 'llm', offset: 0, text: 'x', final: false, durable: false, fencingToken: 1 }),
      ).rejects.toThrow(/unreachable/);
      expect(watching).toBe(0);
    }
  });
});
