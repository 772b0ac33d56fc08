/**
 * Write-to-subscriber latency: how long from a write until a WebSocket subscriber has the
 * event, for writes through the API (fast path) and writes straight into the table (the
 * stream poller's path), beside the poller's own pace.
 */
import { randomBytes } from 'node:crypto';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';

export interface LatencyResult {
  apiP50: number;
  apiP99: number;
  directP50: number;
  directP99: number;
  samples: number;
}

async function gql(url: string, query: string, variables: Record<string, unknown>) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

export async function subscriptionLatency(server: ServerProcess, samples = 100): Promise<LatencyResult> {
  const runId = `bench-${randomBytes(4).toString('hex')}`;
  await gql(server.url, 'mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'latency', budgetCap: 1 },
  });
  const client = createClient({ url: server.url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, lazy: false, retryAttempts: 0 });
  const dynamo = new DynamoDBClient({
    endpoint: server.engineEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'b', secretAccessKey: 'b' },
  });
  const arrivals = new Map<number, (at: number) => void>();
  const dispose = client.subscribe<{ runEvents: { seq: number } }>(
    { query: 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq } }', variables: { runId } },
    { next: (r) => arrivals.get(r.data?.runEvents.seq as number)?.(performance.now()), error: (e) => console.error(e), complete: () => {} },
  );
  const wait = (seq: number) => new Promise<number>((resolve) => arrivals.set(seq, resolve));
  const api: number[] = [];
  const direct: number[] = [];
  let seq = 0;
  // Warm-up: connections, JIT, the subscription's start.
  for (let i = 0; i < 10; i++) {
    const arrived = wait(++seq);
    await gql(server.url, 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
      input: { runId, type: 'warm' },
    });
    await arrived;
  }
  for (let i = 0; i < samples; i++) {
    // Spaced at random, so that direct writes meet the poller at every point of its cycle.
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 180));
    const viaApi = i % 2 === 0;
    const arrived = wait(++seq);
    const started = performance.now();
    if (viaApi) {
      await gql(server.url, 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', {
        input: { runId, type: 'api' },
      });
    } else {
      await dynamo.send(
        new PutItemCommand({
          TableName: 'runplane',
          Item: {
            pk: { S: `default#run#${runId}` },
            sk: { S: `evt#${String(seq).padStart(10, '0')}` },
            seq: { N: String(seq) },
            type: { S: 'direct' },
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    }
    (viaApi ? api : direct).push((await arrived) - started);
  }
  dispose();
  await client.dispose();
  dynamo.destroy();
  return {
    apiP50: percentile(api, 50),
    apiP99: percentile(api, 99),
    directP50: percentile(direct, 50),
    directP99: percentile(direct, 99),
    samples,
  };
}
