/**
 * Contended appends: N clients appending as fast as they can, all to ONE run or each to its
 * own. Throughput, conditional-check failures per success (from the server's /metrics) and
 * latency, on a server with group commit and on one without.
 */
import { randomBytes } from 'node:crypto';
import { graphqlClient } from './clients.ts';
import type { ServerProcess } from './server.ts';
import { percentile } from './stats.ts';

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

export async function contendedAppends(
  server: ServerProcess,
  clients: number,
  runs: number,
  durationMs: number,
): Promise<ContentionResult> {
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
  const elapsed = (performance.now() - started) / 1000;
  const conflicts = (await server.metric('runplane_event_append_conflicts_total')) - conflictsBefore;
  return {
    clients,
    runs,
    appendsPerSecond: latencies.length / elapsed,
    conflictsPerSuccess: conflicts / Math.max(1, latencies.length),
    failures,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}
