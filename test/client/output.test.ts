/**
 * Runplane's client for live output: a writer that batches and keeps offsets (over WebSocket and
 * HTTP), flush and close, a reader that resumes, and a writer under withRun fenced by its claim.
 */
import { describe, expect, test } from 'vitest';
import { testClient } from '../support/client.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer } from '../support/server.ts';

const api = await startTestServer({ RUNPLANE_OUTPUT_FLUSH_MS: '50' });

async function textOf(client: ReturnType<typeof testClient>['client'], runId: string, stream: string) {
  let text = '';
  for await (const piece of client.runOutput(runId, stream)) text += piece;
  return text;
}

describe.each(['ws', 'sse'] as const)('over %s', (transport) => {
  test('a writer batches its writes, keeps the offsets, and close() ends the stream for readers', async () => {
    const runId = await newRun(api);
    const { client, sent } = testClient(api.url, { transport });
    const reader = textOf(client, runId, 'llm');
    const writer = client.output(runId, 'llm', { intervalMs: 30 });
    const tokens = Array.from({ length: 300 }, (_, i) => `tok${i}${i % 50 === 0 ? ' 🙂' : ''} `);
    for (const token of tokens) writer.write(token);
    await writer.flush();
    expect(writer.durableLength).toBe([...tokens.join('')].length);
    await writer.close();
    expect(await reader).toBe(tokens.join(''));
    // Written together: far fewer requests than writes (over HTTP they are counted here).
    if (transport === 'sse') expect(sent.filter((name) => name === 'AppendOutput').length).toBeLessThan(20);
  });
});

test('a reader resumes after any offset, and a writer continues a stream from where it stands', async () => {
  const runId = await newRun(api);
  const { client } = testClient(api.url);
  const first = client.output(runId, 'stdout');
  first.write('line one\n');
  await first.flush();
  // A second writer (another process, later) reads the length itself.
  const second = client.output(runId, 'stdout');
  second.write('line two\n');
  await second.close();
  const text = 'line one\nline two\n';
  for (let from = 0; from <= text.length; from += 3) {
    let got = '';
    for await (const piece of client.runOutput(runId, 'stdout', { afterOffset: from })) got += piece;
    expect(got).toBe(text.slice(from));
  }
});

test('under withRun the writer carries the claim token: once the run is cancelled its text is refused', async () => {
  const runId = await newRun(api);
  const { client } = testClient(api.url);
  const { client: other } = testClient(api.url);
  let refused: string | undefined;
  const outcome = client.withRun({ runId, holder: 'worker-1', ttlSeconds: 30 }, async (run, signal) => {
    const writer = run.output('llm');
    writer.write('partial answer');
    await writer.flush();
    await other.cancelRun({ runId, reason: 'enough' });
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    writer.write(' and more');
    refused = await writer.flush().then(
      () => 'stored',
      (err: { code?: string }) => err.code,
    );
  });
  await expect(outcome).rejects.toMatchObject({ code: 'RUN_CANCELLED' });
  expect(refused).toBe('CLAIM_LOST');
  const read = await client.request(
    (await import('runplane/client')).graphql(`query($id: ID!) { run(id: $id) { outputs { length } output(stream: "llm") { text } } }`),
    { id: runId },
  );
  expect(read.run?.output?.text).toBe('partial answer');
  // Refused when it was written, not only when it was to be stored: no reader ever saw it.
  expect(read.run?.outputs).toEqual([{ length: 'partial answer'.length }]);
});
