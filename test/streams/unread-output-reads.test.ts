/**
 * runOutput subscriptions of one connection whose socket stopped taking frames: a read that
 * waited for one of the connection's places and finds its send buffer full by then reads
 * nothing (a page read then would only be dropped), as an event feed's does. Counted by the
 * Query requests the server sends for the stream's chunks.
 */
import { describe, expect, test } from 'vitest';
import type { OutputChunk } from '../../src/domain/output.ts';
import { SendBuffer } from '../../src/lib/send-buffer.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { startTestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const SUBSCRIPTIONS = 20;
const PIECE = 128 * 1024;

describe('runOutput subscriptions on a connection that stopped reading', () => {
  test(`${SUBSCRIPTIONS} of them read the table only while their connection has room`, async () => {
    const api = await startTestServer();
    const runId = await newRun(api);
    for (let offset = 0; offset < 4 * PIECE; offset += PIECE) {
      const appended = await api.gql('mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename } }', {
        input: { runId, stream: 'llm', offset, text: 'x'.repeat(PIECE), durable: true },
      });
      expect(appended.data?.appendOutput?.__typename).toBe('OutputChunk');
    }
    const chunkReads = () =>
      api.requestInputs.filter(({ name, input }) => name === 'QueryCommand' && JSON.stringify(input).includes(runId)).length;
    const before = chunkReads();

    const sendBuffer = new SendBuffer(64 * 1024);
    const feeds = Array.from({ length: SUBSCRIPTIONS }, () =>
      api.server.live.runOutput({ tenant: OPEN_TENANT, runId, stream: 'llm', afterOffset: 0, sendBuffer }),
    );
    // As socket delivery does: a chunk handed out holds its frame's bytes until the socket takes
    // it, and this socket takes nothing.
    let handed = 0;
    for (const feed of feeds)
      void feed.next().then(({ value, done }) => {
        if (done) return;
        handed++;
        sendBuffer.hold(Buffer.byteLength((value as OutputChunk).text));
      });
    await waitFor(() => handed > 0 && sendBuffer.full, { what: 'a chunk to fill the send buffer' });
    // Both of the connection's places taken after every read queued before: those are all done.
    let started = 0;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const places = [0, 1].map(() =>
      sendBuffer.read(async () => {
        started++;
        await held;
      }),
    );
    await waitFor(() => started === 2, { what: "the connection's places" });
    release();
    await Promise.all(places);

    // Those whose turn came while there was room (the first, and one beside it), not every one.
    expect(chunkReads() - before, 'Query requests for the stream').toBeLessThanOrEqual(4);
    for (const feed of feeds) await feed.return?.();
  });
});
