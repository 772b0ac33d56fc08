/**
 * Live output across server processes on one table and one Redis: a reader on one replica
 * follows a writer on another, character for character; a server killed mid-stream loses
 * nothing it answered as stored, and the writer goes on through another server with nothing
 * lost or doubled.
 */
import { createRunplane } from 'runplane/client';
import { describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { uniqueName } from '../support/aws.ts';
import { leftoversAfterEach } from '../support/leftovers.ts';
import { tcpProxy } from '../support/proxy.ts';
import { noRedis, redisForFile } from '../support/redis.ts';
import { type Replica, startReplica, stopReplica } from '../support/replicas.ts';
import { newRun as createRun } from '../support/runs.ts';
import { waitFor } from '../support/wait.ts';

const redis = redisForFile();
const leftovers = leftoversAfterEach();

/** A long flush interval: text waits in a server's memory long enough to be lost with it. */
const env = { RUNPLANE_OUTPUT_FLUSH_MS: '2000' };

async function pair() {
  const table = uniqueName('output');
  const replicas = await Promise.all([0, 1].map(() => startReplica({ table, redisUrl: redis.url, env })));
  leftovers.push(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
  });
  return replicas as [Replica, Replica];
}

const client = (url: string) => {
  const c = createRunplane({ url, webSocketImpl: WebSocket, retry: { baseDelayMs: 20, maxDelayMs: 200, maxAttempts: 50 } });
  leftovers.push(() => c.close());
  return c;
};

const newRun = (replica: Replica) => createRun(replica, { task: 'output', budgetCap: 1 });

const tokens = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `w${from + i}${(from + i) % 40 === 0 ? '🙂' : ''} `);

describe.skipIf(noRedis)('output over replicas', () => {
  test('a reader on one replica follows a writer on the other, character for character', async () => {
    const [a, b] = await pair();
    const runId = await newRun(a);
    const reader = client(b.url);
    let seen = '';
    const reading = (async () => {
      for await (const text of reader.runOutput(runId, 'llm')) seen += text;
    })();
    const writer = client(a.url).output(runId, 'llm', { intervalMs: 20 });
    const words = tokens(300);
    for (const [i, word] of words.entries()) {
      writer.write(word);
      // Live text reaches the other replica before it is stored (flushes are 2 s apart here).
      if (i === 100) await waitFor(() => seen.length > 0, { what: 'live text on the other replica before any flush' });
    }
    await writer.close();
    await reading;
    expect(seen).toBe(words.join(''));
  });

  test('a server killed mid-stream loses nothing answered as stored; the writer goes on through another', async () => {
    const [a, b] = await pair();
    const runId = await newRun(a);
    const proxy = await tcpProxy(a.url);
    leftovers.push(() => proxy.close());
    const writer = client(proxy.url).output(runId, 'llm', { intervalMs: 20 });
    const before = tokens(100);
    for (const word of before) writer.write(word);
    await writer.flush();
    const stored = writer.durableLength;
    expect(stored).toBe([...before.join('')].length);
    // Accepted by A but not stored (its flush is 2 s off) when A dies.
    const middle = tokens(50, 100);
    for (const word of middle) writer.write(word);
    await waitFor(
      async () => {
        const answer = await a.gql<{ run: { outputs: { length: number }[] } }>('query($id: ID!) { run(id: $id) { outputs { length } } }', {
          id: runId,
        });
        return (answer.data?.run.outputs[0]?.length ?? 0) > stored;
      },
      { what: 'A to accept text it has not stored' },
    );
    await stopReplica(a, 'SIGKILL');
    proxy.retarget(b.url);
    proxy.drop();
    const after = tokens(50, 150);
    for (const word of after) writer.write(word);
    await writer.close();
    const whole = [...before, ...middle, ...after].join('');
    const read = await b.gql<{ run: { output: { text: string; final: boolean } } }>(
      'query($id: ID!) { run(id: $id) { output(stream: "llm") { text final } } }',
      { id: runId },
    );
    expect(read.data?.run.output).toEqual({ text: whole, final: true });
    // A reader from the start, on the survivor, gets the same text.
    let seen = '';
    for await (const text of client(b.url).runOutput(runId, 'llm')) seen += text;
    expect(seen).toBe(whole);
  });
});
