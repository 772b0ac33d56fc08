/**
 * Stock clients across a graceful restart: graphql-ws and graphql-sse with their default
 * options (which retry) reconnect by themselves; following README's recipe (the subscribe
 * payload's afterSeq moved to the last seq received, which both clients send again on
 * each retry) they continue with every seq once, in order. Without the recipe they replay.
 */
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import { expect, test } from 'vitest';
import WebSocket from 'ws';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const RUN_EVENTS = 'subscription($runId: ID!, $afterSeq: Int) { runEvents(runId: $runId, afterSeq: $afterSeq) { seq } }';
const append = (api: TestServer, runId: string) =>
  api.gql('mutation($id: ID!) { appendEvent(input: { runId: $id, type: "step" }) { __typename } }', { id: runId });

/** A server, a run with three events, and what it takes to restart the server on the same port (and table). */
async function setUp() {
  let api = await startTestServer({ stopAfterAll: false });
  const runId = uniqueName('run');
  await api.gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 't', budgetCap: 1 },
  });
  for (let i = 0; i < 3; i++) await append(api, runId);
  return {
    runId,
    url: () => api.url,
    append: () => append(api, runId),
    async restart() {
      const { table, url } = api;
      await api.server.stop();
      api = await startTestServer({ table, env: { PORT: new URL(url).port }, stopAfterAll: false });
    },
    stop: () => api.server.stop(),
  };
}

test('graphql-ws, default options: with the recipe every seq once across a restart; without it, a replay', async () => {
  const cluster = await setUp();
  const client = createWsClient({ url: cluster.url().replace(/^http/, 'ws'), webSocketImpl: WebSocket });
  try {
    // The recipe: one variables object, its afterSeq moved to each seq received.
    const variables = { runId: cluster.runId, afterSeq: 0 };
    const resumed: number[] = [];
    client.subscribe<{ runEvents: { seq: number } }>(
      { query: RUN_EVENTS, variables },
      {
        next: ({ data }) => {
          if (!data) return;
          resumed.push(data.runEvents.seq);
          variables.afterSeq = data.runEvents.seq;
        },
        error: () => undefined,
        complete: () => undefined,
      },
    );
    const naive: number[] = [];
    client.subscribe<{ runEvents: { seq: number } }>(
      { query: RUN_EVENTS, variables: { runId: cluster.runId, afterSeq: 0 } },
      { next: ({ data }) => data && naive.push(data.runEvents.seq), error: () => undefined, complete: () => undefined },
    );
    await waitFor(() => resumed.length >= 3 && naive.length >= 3, { what: 'the first three' });
    await cluster.restart();
    for (let i = 0; i < 3; i++) await cluster.append();
    await waitFor(() => resumed.length >= 6 && naive.length >= 9, { timeoutMs: 60_000, what: 'the events after the restart' });
    expect(resumed).toEqual([1, 2, 3, 4, 5, 6]);
    expect(naive).toEqual([1, 2, 3, 1, 2, 3, 4, 5, 6]);
  } finally {
    await client.dispose();
    await cluster.stop();
  }
});

test('graphql-sse, default options: with the recipe every seq once across a restart', async () => {
  const cluster = await setUp();
  const client = createSseClient({ url: cluster.url() });
  try {
    const request = { query: RUN_EVENTS, variables: { runId: cluster.runId, afterSeq: 0 } };
    const seqs: number[] = [];
    let completed = false;
    client.subscribe<{ runEvents: { seq: number } }>(request, {
      next: ({ data }) => {
        if (!data) return;
        seqs.push(data.runEvents.seq);
        request.variables.afterSeq = data.runEvents.seq;
      },
      error: () => undefined,
      complete: () => {
        completed = true;
      },
    });
    await waitFor(() => seqs.length >= 3, { what: 'the first three' });
    await cluster.restart();
    for (let i = 0; i < 3; i++) await cluster.append();
    await waitFor(() => seqs.length >= 6, { timeoutMs: 60_000, what: 'the events after the restart' });
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6]);
    // The restart did not look like the end of the subscription.
    expect(completed).toBe(false);
  } finally {
    client.dispose();
    await cluster.stop();
  }
});
