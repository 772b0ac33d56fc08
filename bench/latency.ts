/**
 * Single-request latency: a GraphQL appendEvent over HTTP against the raw SDK's conditional
 * PutItem on the same engine, and run(id) with 100 events against the raw SDK Query.
 */
import { randomBytes } from 'node:crypto';
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';

export interface LatencyPair {
  api: { p50: number; p99: number };
  raw: { p50: number; p99: number };
  ratio: number;
}

/** Times two operations alternately, so that both meet the same load on this shared machine. */
async function timePair(samples: number, a: () => Promise<unknown>, b: () => Promise<unknown>) {
  const first: number[] = [];
  const second: number[] = [];
  for (let i = 0; i < samples; i++) {
    for (const [run, into] of (i % 2
      ? [
          [a, first],
          [b, second],
        ]
      : [
          [b, second],
          [a, first],
        ]) as [() => Promise<unknown>, number[]][]) {
      const started = performance.now();
      await run();
      into.push(performance.now() - started);
    }
  }
  const stats = (xs: number[]) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99) });
  return { a: stats(first), b: stats(second), ratio: percentile(first, 50) / percentile(second, 50) };
}

export async function singleRequestLatency(server: ServerProcess, samples = 400) {
  const gql = graphqlClient(server.url);
  // The baseline is the SDK's document client, which like the API takes and gives plain JSON.
  const dynamo = documentClient(server.engineEndpoint);
  const runId = `bench-${randomBytes(4).toString('hex')}`;
  const rawPk = `default#run#raw-${randomBytes(4).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'latency', budgetCap: 1 },
  });
  const append = () =>
    gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }', {
      input: { runId, type: 'step', payload: { n: 1 } },
    });
  let rawSeq = 0;
  const put = () =>
    dynamo.send(
      new PutCommand({
        TableName: 'runplane',
        Item: { pk: rawPk, sk: `evt#${String(++rawSeq).padStart(10, '0')}`, type: 'step', payload: { n: 1 } },
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  // Warm both paths: connections, JIT, caches.
  for (let i = 0; i < 100; i++) {
    await append();
    await put();
  }
  const appends = await timePair(samples, append, put);
  const appendResult: LatencyPair = { api: appends.a, raw: appends.b, ratio: appends.ratio };

  // run(id) with 100 events against the one Query it stands for.
  const readRun = `bench-read-${randomBytes(4).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: readRun, task: 'read', budgetCap: 1 },
  });
  for (let i = 0; i < 100; i++)
    await gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
      input: { runId: readRun, type: 'step', payload: { i } },
    });
  const read = () =>
    gql(
      'query($id: ID!) { run(id: $id) { id task status version budget { cap spent } events(first: 100) { edges { node { seq type payload } } } } }',
      { id: readRun },
    );
  const query = () =>
    dynamo.send(
      new QueryCommand({
        TableName: 'runplane',
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `default#run#${readRun}` },
        Limit: 103,
      }),
    );
  for (let i = 0; i < 50; i++) {
    await read();
    await query();
  }
  const reads = await timePair(samples / 2, read, query);
  dynamo.destroy();
  const readResult: LatencyPair = { api: reads.a, raw: reads.b, ratio: reads.ratio };
  return { append: appendResult, read: readResult };
}
