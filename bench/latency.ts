/**
 * Single-request latency: a GraphQL appendEvent over HTTP against the raw SDK's conditional
 * PutItem on the same engine, and run(id) with 100 events against the raw SDK Query.
 */
import { randomBytes } from 'node:crypto';
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { ServerProcess } from './server.ts';
import { percentile } from './stats.ts';

export interface LatencyPair {
  api: { p50: number; p99: number };
  raw: { p50: number; p99: number };
  ratio: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** A GraphQL client over one kept-alive connection, like the SDK's own. */
export function graphqlClient(url: string, key?: string) {
  const { hostname, port, pathname } = new URL(url);
  return (query: string, variables: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const body = JSON.stringify({ query, variables });
      const request = httpRequest(
        {
          hostname,
          port,
          path: pathname,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            ...(key ? { authorization: `Bearer ${key}` } : {}),
          },
        },
        (response: IncomingMessage) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk) => {
            text += chunk;
          });
          response.on('end', () => {
            const parsed = JSON.parse(text) as { data?: Record<string, unknown>; errors?: unknown[] };
            if (parsed.errors) reject(new Error(JSON.stringify(parsed.errors)));
            else resolve(parsed.data ?? {});
          });
        },
      );
      request.on('error', reject);
      request.end(body);
    });
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
  const dynamo = DynamoDBDocumentClient.from(
    new DynamoDBClient({ endpoint: server.engineEndpoint, region: 'us-east-1', credentials: { accessKeyId: 'b', secretAccessKey: 'b' } }),
  );
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
