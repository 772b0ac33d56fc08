/**
 * DynamoDB failing under a server's background work (what no request awaits: output flushes)
 * must not take the process down: it says what failed, tries again, and serves throughout.
 */
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Engine } from '@runplane/engine';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { outputChunkItem } from '../../src/table/codec.ts';
import { dynamoClient, uniqueName } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { type MainProcess, startMain } from '../support/main-process.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { waitFor } from '../support/wait.ts';

const APPEND = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) { __typename ... on OutputChunk { offset durable } ... on OffsetConflict { length } }
}`;

describe.skipIf(onlyEmbedded)('background work meeting DynamoDB failures', () => {
  let engine: Engine;
  let main: MainProcess;
  let url: string;
  const table = uniqueName('background');
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    main = startMain({
      AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      RUNPLANE_TABLE: table,
      RUNPLANE_GRAPHIQL: 'false',
      RUNPLANE_OUTPUT_FLUSH_MS: '50',
    });
    await waitFor(() => /Runplane is up: (\S+)/.test(main.output()) || main.child.exitCode !== null, {
      timeoutMs: 60_000,
      what: 'the server to start',
    });
    url = /Runplane is up: (\S+)/.exec(main.output())?.[1] as string;
    if (!url) throw new Error(`the server did not start:\n${main.output()}`);
  });
  afterAll(async () => {
    if (main && main.child.exitCode === null && main.child.signalCode === null) {
      main.child.kill('SIGTERM');
      await main.exited;
    }
    await engine?.close();
  });

  const gql = async (query: string, variables: Record<string, unknown>) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    // biome-ignore lint/suspicious/noExplicitAny: the test reads the answer by path
    return (await response.json()) as { data?: any; errors?: unknown[] };
  };
  const alive = () => main.child.exitCode === null && main.child.signalCode === null;

  test('a flush that finds another chunk where it writes, and cannot read it: the server stays up and stores the stream once DynamoDB answers', async () => {
    const runId = await newRun({ gql }, { task: 'output', budgetCap: 1 });
    const first = await gql(APPEND, { input: { runId, stream: 'llm', offset: 0, text: 'one ', final: false, durable: true } });
    expect(first.data?.appendOutput).toEqual({ __typename: 'OutputChunk', offset: 0, durable: true });
    // Another server stored the writer's next text first (the writer sent it there too).
    await DynamoDBDocumentClient.from(dynamoClient({ endpoint: engine.endpoint })).send(
      new PutCommand({
        TableName: table,
        Item: outputChunkItem(OPEN_TENANT, { runId, stream: 'llm', offset: 4, text: 'two ', final: false }, new Date()),
      }),
    );
    // The read that compares that chunk with ours fails, as it does while the engine is down.
    const fault = engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError' });
    try {
      const second = await gql(APPEND, { input: { runId, stream: 'llm', offset: 4, text: 'two ', final: false } });
      expect(second.data?.appendOutput).toEqual({ __typename: 'OutputChunk', offset: 4, durable: false });
      // The flush put its chunk, was refused (one is there), and tried to read the one there.
      await waitFor(() => fault.hits >= 3 || !alive(), { what: 'the flush to read the chunk in its place' });
      await waitFor(() => /storing output of run \S+ failed/.test(main.output()) || !alive(), {
        what: 'the server to say the flush failed',
      });
      expect(alive(), main.output()).toBe(true);
    } finally {
      fault.remove();
    }
    // Once the read answers, the chunk there is found to be the same text: the stream is 8 long, stored.
    await waitFor(
      async () => {
        const answer = await gql(APPEND, { input: { runId, stream: 'llm', offset: 8, text: '', final: true, durable: true } });
        return answer.data?.appendOutput?.__typename === 'OutputChunk';
      },
      { what: 'the stream to close at 8' },
    );
    const read = await gql('query($id: ID!) { run(id: $id) { output(stream: "llm") { text final } } }', { id: runId });
    expect(read.data?.run?.output).toEqual({ text: 'one two ', final: true });
    expect(alive(), main.output()).toBe(true);
  });
});
