/**
 * Hot runs past one partition: one run, 64 writers appending 1 KB events as fast as they
 * can, its events on 1 shard against 8, with the engine's throughput model on (at a fraction
 * of DynamoDB's 1,000 write units a partition, as one machine can drive) and off; and with
 * the model counting under limits no run reaches (what the model itself costs the engine). Events a second, p99, and the throttles the server met per append.
 */
import { randomBytes } from 'node:crypto';
import { graphqlClient } from '../harness/clients.ts';
import { type ServerProcess, startServerProcess } from '../harness/processes.ts';
import { ms, percentile, ratio } from '../harness/stats.ts';

const WRITERS = 64;
const PAYLOAD = 'x'.repeat(1000);
const SECONDS = 8;
/** A fifth of DynamoDB's partition limits: what 64 writers on a 2-core machine can push past. */
const PARTITION_WCU = 200;
const PARTITION_RCU = 600;
/** Units a second no run here reaches: the model counts and never refuses. */
const UNREACHED = 10_000_000;
/** Alternating stretches of the counting-against-off comparison. */
const ROUNDS = 4;

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
  /** Measured in stretches alternating with the counting model's. */
  alternating?: boolean;
}

/** Every sample of a labelled counter on /metrics, summed. */
async function summed(server: ServerProcess, name: string) {
  const text = await (await fetch(new URL('/metrics', server.url))).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((n, line) => n + Number(line.split(' ').at(-1)), 0);
}

interface Load {
  latencies: number[];
  seconds: number;
  throttles: number;
  failures: number;
}

/** The loads' figures together (alternating stretches of one configuration). */
function summary(model: Model, shards: number, loads: Load[]): PartitionRow {
  const latencies = loads.flatMap((l) => l.latencies);
  return {
    model,
    shards,
    eventsPerSecond: latencies.length / loads.reduce((n, l) => n + l.seconds, 0),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    throttlesPerSuccess: loads.reduce((n, l) => n + l.throttles, 0) / Math.max(1, latencies.length),
    failures: loads.reduce((n, l) => n + l.failures, 0),
  };
}

async function hotRun(server: ServerProcess, shards: number, seconds = SECONDS): Promise<Load> {
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
  const deadline = started + seconds * 1000;
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
  return {
    latencies,
    seconds: (performance.now() - started) / 1000,
    throttles: (await summed(server, 'runplane_dynamodb_throttles_total')) - throttlesBefore,
    failures,
  };
}

const serverWith = (limits?: [number, number]) =>
  startServerProcess(
    limits
      ? {
          RUNPLANE_ENGINE_PARTITION_LIMITS: 'true',
          RUNPLANE_ENGINE_PARTITION_WCU: String(limits[0]),
          RUNPLANE_ENGINE_PARTITION_RCU: String(limits[1]),
        }
      : {},
  );

export async function partitionsSection(step: (what: string) => void) {
  const measured: PartitionRow[] = [];
  for (const model of ['on', 'off'] as const) {
    const server = await serverWith(model === 'on' ? [PARTITION_WCU, PARTITION_RCU] : undefined);
    try {
      for (const shards of [1, 8]) {
        step(`partitions: one run, ${WRITERS} writers, 1 KB events, ${shards} shard(s), throughput model ${model}`);
        measured.push(summary(model, shards, [await hotRun(server, shards)]));
      }
    } finally {
      await server.stop();
    }
  }
  // The model's own cost: counting under limits never reached against off, in alternating stretches.
  step('partitions: 8 shards, the model counting (limits never reached) against off, alternating');
  const [off, counting] = await Promise.all([serverWith(), serverWith([UNREACHED, UNREACHED])]);
  try {
    const loads: Record<'off' | 'counting', Load[]> = { off: [], counting: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? (['off', 'counting'] as const) : (['counting', 'off'] as const);
      for (const which of order) loads[which].push(await hotRun(which === 'off' ? off : counting, 8, SECONDS / ROUNDS));
    }
    measured.push(summary('counting', 8, loads.counting), { ...summary('off', 8, loads.off), alternating: true } as PartitionRow);
  } finally {
    await Promise.all([off.stop(), counting.stop()]);
  }
  const find = (model: Model, shards: number, alternating = false) =>
    measured.find((r) => r.model === model && r.shards === shards && Boolean(r.alternating) === alternating) as PartitionRow;
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
    `model off, alternating with it: ${find('off', 8, true).eventsPerSecond.toFixed(0)}/s (${ms(find('off', 8, true).p99)})`,
    ratio(find('counting', 8).eventsPerSecond / find('off', 8, true).eventsPerSecond),
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
