/**
 * Hot runs past one partition: one run, 64 writers appending 1 KB events as fast as they
 * can, its events on 1 shard against 8, with the engine's throughput model on (at a fraction
 * of DynamoDB's 1,000 write units a partition, as one machine can drive) and off; and with
 * the model counting under limits no run reaches (what the model itself costs the engine). Events a second, p99, and the throttles the server met per append.
 */
import { randomBytes } from 'node:crypto';
import { graphqlClient } from './clients.ts';
import { type ServerProcess, startServerProcess } from './server.ts';
import { ms, percentile, ratio } from './stats.ts';

const WRITERS = 64;
const PAYLOAD = 'x'.repeat(1000);
const SECONDS = 8;
/** A fifth of DynamoDB's partition limits: what 64 writers on a 2-core machine can push past. */
const PARTITION_WCU = 200;
const PARTITION_RCU = 600;
/** Units a second no run here reaches: the model counts and never refuses. */
const UNREACHED = 10_000_000;

const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';

/** on: at PARTITION_WCU; off; counting: on with limits no run reaches (what counting units costs the engine). */
type Model = 'on' | 'off' | 'counting';

export interface PartitionRow {
  model: Model;
  shards: number;
  eventsPerSecond: number;
  p50: number;
  p99: number;
  throttlesPerSuccess: number;
  /** Appends answered THROTTLED (the server's retries ran out) or failed otherwise. */
  failures: number;
}

/** Every sample of a labelled counter on /metrics, summed. */
async function summed(server: ServerProcess, name: string) {
  const text = await (await fetch(new URL('/metrics', server.url))).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((n, line) => n + Number(line.split(' ').at(-1)), 0);
}

async function hotRun(server: ServerProcess, model: Model, shards: number): Promise<PartitionRow> {
  const gql = graphqlClient(server.url);
  const runId = `hot-${randomBytes(5).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'partitions', budgetCap: 1, eventShards: shards },
  });
  await gql(APPEND, { input: { runId, type: 'warm' } });
  const throttlesBefore = await summed(server, 'runplane_dynamodb_throttles_total');
  const latencies: number[] = [];
  let failures = 0;
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      while (performance.now() < deadline) {
        const at = performance.now();
        try {
          await gql(APPEND, { input: { runId, type: 'step', payload: { writer, pad: PAYLOAD } } });
          latencies.push(performance.now() - at);
        } catch {
          failures++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const throttles = (await summed(server, 'runplane_dynamodb_throttles_total')) - throttlesBefore;
  return {
    model,
    shards,
    eventsPerSecond: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    throttlesPerSuccess: throttles / Math.max(1, latencies.length),
    failures,
  };
}

export async function partitionsSection(step: (what: string) => void) {
  const measured: PartitionRow[] = [];
  for (const model of ['on', 'off', 'counting'] as const) {
    const limits = { on: [PARTITION_WCU, PARTITION_RCU], counting: [UNREACHED, UNREACHED], off: undefined }[model];
    const env: Record<string, string> = limits
      ? {
          RUNPLANE_ENGINE_PARTITION_LIMITS: 'true',
          RUNPLANE_ENGINE_PARTITION_WCU: String(limits[0]),
          RUNPLANE_ENGINE_PARTITION_RCU: String(limits[1]),
        }
      : {};
    const server = await startServerProcess(env);
    try {
      for (const shards of model === 'counting' ? [8] : [1, 8]) {
        step(`partitions: one run, ${WRITERS} writers, 1 KB events, ${shards} shard(s), throughput model ${model}`);
        measured.push(await hotRun(server, model, shards));
      }
    } finally {
      await server.stop();
    }
  }
  const find = (model: Model, shards: number) => measured.find((r) => r.model === model && r.shards === shards) as PartitionRow;
  const rows: [string, string, string, string][] = [];
  for (const model of ['on', 'off'] as const) {
    const one = find(model, 1);
    const eight = find(model, 8);
    const label = model === 'on' ? `model on, ${PARTITION_WCU} WCU a partition` : 'model off';
    rows.push([
      `hot run, ${WRITERS} writers, 1 KB, 8 shards, ${label}: events/s (p99; throttles per append)`,
      `${eight.eventsPerSecond.toFixed(0)}/s (${ms(eight.p99)}; ${eight.throttlesPerSuccess.toFixed(2)})`,
      `1 shard: ${one.eventsPerSecond.toFixed(0)}/s (${ms(one.p99)}; ${one.throttlesPerSuccess.toFixed(2)})`,
      ratio(eight.eventsPerSecond / one.eventsPerSecond),
    ]);
  }
  rows.push([
    'what counting units costs the engine: 8 shards, model on with limits never reached, events/s (p99)',
    `${find('counting', 8).eventsPerSecond.toFixed(0)}/s (${ms(find('counting', 8).p99)})`,
    `model off: ${find('off', 8).eventsPerSecond.toFixed(0)}/s (${ms(find('off', 8).p99)})`,
    ratio(find('counting', 8).eventsPerSecond / find('off', 8).eventsPerSecond),
  ]);
  return {
    rows,
    result: {
      writers: WRITERS,
      payloadBytes: PAYLOAD.length,
      seconds: SECONDS,
      partitionWcu: PARTITION_WCU,
      partitionRcu: PARTITION_RCU,
      rows: measured,
    },
  };
}
