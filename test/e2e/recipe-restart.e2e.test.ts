/**
 * README's graphql-ws recipe, exactly as written there (a stock client with `webSocketImpl`,
 * `shouldRetry` and `retryAttempts`, and `afterSeq` moved to each seq received), against the
 * server process `npm start` runs, stopped for real: by SIGTERM and left down for 4 s (timed
 * from the old process's exit), and by SIGKILL. Every event reaches it once, in order.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { afterAll, expect, test } from 'vitest';
import WebSocket from 'ws';
import { type MainProcess, startMain } from '../support/main-process.ts';
import { freePort } from '../support/ports.ts';
import { waitFor } from '../support/wait.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'runplane-recipe-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function serve(port: number): Promise<MainProcess & { url: string }> {
  const main = startMain({ PORT: String(port), RUNPLANE_DATA_DIR: dataDir, RUNPLANE_GRAPHIQL: 'false' });
  await waitFor(() => /Runplane is up: (\S+)/.test(main.output()) || main.child.exitCode !== null, {
    timeoutMs: 60_000,
    what: 'the server',
  });
  const url = /Runplane is up: (\S+)/.exec(main.output())?.[1];
  if (!url) throw new Error(`the server did not start:\n${main.output()}`);
  return { ...main, url };
}

/** POSTs until a server answers (one is restarting): the append's answer. */
async function append(url: string, runId: string, i: number) {
  for (;;) {
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }',
          variables: { input: { runId, type: 'step', payload: { i }, idempotencyKey: `${runId}-${i}` } },
        }),
      });
      const body = (await response.json()) as { data?: { appendEvent: { __typename: string; seq?: number } } };
      if (body.data?.appendEvent.__typename === 'Event') return body.data.appendEvent.seq as number;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test.each([
  ['SIGTERM', 4_000],
  ['SIGKILL', 0],
] as const)(
  'the graphql-ws recipe across a %s of `npm start` (down %i ms): every event once, in order',
  async (signal, downMs) => {
    const port = await freePort();
    let server = await serve(port);
    const runId = `recipe-${signal.toLowerCase()}`;
    await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `mutation { createRun(input: { id: "${runId}", task: "t", budgetCap: 1 }) { __typename } }` }),
    });
    for (let i = 1; i <= 5; i++) await append(server.url, runId, i);

    // README's recipe (section "Clients", graphql-ws), with the test's own handle().
    const seen: number[] = [];
    const handle = (event: { seq: number }) => seen.push(event.seq);
    const client = createClient({
      url: server.url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      shouldRetry: () => true,
      retryAttempts: Number.POSITIVE_INFINITY,
    });
    const variables = { runId, afterSeq: 0 };
    let failure: unknown;
    const dispose = client.subscribe<{ runEvents: { seq: number } }>(
      {
        query: 'subscription($runId: ID!, $afterSeq: Int) { runEvents(runId: $runId, afterSeq: $afterSeq) { seq type payload } }',
        variables,
      },
      {
        next: ({ data }) => {
          if (!data) return;
          handle(data.runEvents);
          variables.afterSeq = data.runEvents.seq; // what a reconnect resumes after
        },
        error: (err) => {
          failure = err;
        },
        complete: () => undefined,
      },
    );
    try {
      await waitFor(() => seen.length >= 5, { what: 'the first five events' });
      server.child.kill(signal);
      await server.exited;
      if (downMs) await new Promise((resolve) => setTimeout(resolve, downMs)); // down, as a deploy is
      server = await serve(port);
      for (let i = 6; i <= 10; i++) await append(server.url, runId, i);
      await waitFor(() => seen.length >= 10 || failure !== undefined, { timeoutMs: 60_000, what: `ten events (have ${seen.join(',')})` });
      expect(failure).toBeUndefined();
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    } finally {
      dispose();
      await client.dispose();
      server.child.kill('SIGKILL');
      await server.exited;
    }
  },
  120_000,
);
