/**
 * Contended appends: N clients appending as fast as they can, all to ONE run or each to its
 * own. Throughput, conditional-check failures per success (from the server's /metrics) and
 * latency, on a server with group commit and on one without.
 */
import { randomBytes } from 'node:crypto';
import { graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';

export interface ContentionResult {
  clients: number;
  runs: number;
  appendsPerSecond: number;
  conflictsPerSuccess: number;
  /** Appends refused after too many collisions (CONTENTION): each is a client retrying. */
  failures: number;
  p50: number;
  p99: number;
}

const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';

interface Sample {
  latencies: number[];
  conflicts: number;
  failures: number;
  seconds: number;
}

/** One stretch of load on one server: every append's latency, and the conflicts it caused. */
async function appendLoad(server: ServerProcess, clients: number, runs: number, durationMs: number): Promise<Sample> {
  const gql = graphqlClient(server.url);
  const runIds = await Promise.all(
    Array.from({ length: runs }, async () => {
      const id = `bench-${randomBytes(5).toString('hex')}`;
      await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
        input: { id, task: 'contention', budgetCap: 1 },
      });
      // The first append makes the server know the run: later ones measure appending alone.
      await gql(APPEND, { input: { runId: id, type: 'warm' } });
      return id;
    }),
  );
  const conflictsBefore = await server.metric('runplane_event_append_conflicts_total');
  const latencies: number[] = [];
  let failures = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const runId = runIds[client % runs] as string;
      while (performance.now() < deadline) {
        const at = performance.now();
        try {
          await gql(APPEND, { input: { runId, type: 'step', payload: { client } } });
          latencies.push(performance.now() - at);
        } catch {
          failures++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const conflicts = (await server.metric('runplane_event_append_conflicts_total')) - conflictsBefore;
  return { latencies, conflicts, failures, seconds };
}

function summary(samples: Sample[], clients: number, runs: number): ContentionResult {
  const latencies = samples.flatMap((s) => s.latencies);
  const conflicts = samples.reduce((n, s) => n + s.conflicts, 0);
  return {
    clients,
    runs,
    appendsPerSecond: latencies.length / samples.reduce((n, s) => n + s.seconds, 0),
    conflictsPerSuccess: conflicts / Math.max(1, latencies.length),
    failures: samples.reduce((n, s) => n + s.failures, 0),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

/**
 * The same load on two servers, in alternating rounds so both meet the same moments of this
 * shared machine (one block each would compare two different machines).
 */
export async function contendedAppends(
  servers: [ServerProcess, ServerProcess],
  clients: number,
  runs: number,
  durationMs: number,
  rounds = 4,
): Promise<[ContentionResult, ContentionResult]> {
  const samples: [Sample[], Sample[]] = [[], []];
  for (let round = 0; round < rounds; round++) {
    // Which goes first alternates too: neither always follows the other's load.
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) samples[i as 0 | 1].push(await appendLoad(servers[i as 0 | 1], clients, runs, durationMs / rounds));
  }
  return [summary(samples[0], clients, runs), summary(samples[1], clients, runs)];
}
