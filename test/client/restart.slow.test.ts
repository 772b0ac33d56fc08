/**
 * An agent's append loop on the client's default options, across a restart of the server that
 * leaves it down for 5 s (a deploy): no call throws, and every append is stored once, at the seq
 * its answer named (the client's idempotency key makes the retried one safe).
 */
import { createRunplane } from 'runplane/client';
import { expect, test } from 'vitest';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const DOWN_MS = 5_000;
const APPENDS = 20;

test(`appends with the default retry policy across ${DOWN_MS / 1000} s of a server down: none throws, each stored once`, async () => {
  let api: TestServer = await startTestServer({ stopAfterAll: false });
  const runId = await newRun(api);
  const client = createRunplane({ url: api.url, transport: 'sse' });
  let restarted: Promise<void> | undefined;
  try {
    const seqs: number[] = [];
    for (let i = 0; i < APPENDS; i++) {
      if (i === APPENDS / 2) {
        const { table, url } = api;
        await api.server.stop();
        // The server is down for the whole of DOWN_MS (the scenario, not a wait for a condition).
        restarted = new Promise<void>((resolve) => setTimeout(resolve, DOWN_MS)).then(async () => {
          api = await startTestServer({ table, env: { PORT: new URL(url).port }, stopAfterAll: false });
        });
      }
      const answer = await client.appendEvent({ runId, type: 'step', payload: { i } });
      if (answer.__typename !== 'Event') throw new Error(`append ${i} answered ${answer.__typename}`);
      seqs.push(answer.seq);
    }
    expect(seqs).toEqual(Array.from({ length: APPENDS }, (_, i) => i + 1));
    const stored = await client.run(runId, { consistent: true, first: 100 });
    expect(stored?.events.edges.map((edge) => (edge.node.payload as { i: number }).i)).toEqual(
      Array.from({ length: APPENDS }, (_, i) => i),
    );
  } finally {
    await client.close();
    await restarted;
    await api.server.stop();
  }
}, 60_000);
