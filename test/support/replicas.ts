/**
 * Server replicas as separate processes (src/main.ts, as `npm start` runs it) on one DynamoDB
 * endpoint and one Redis, each on a port of its own, with its /metrics read back as numbers.
 */
import { inject } from 'vitest';
import { type MainProcess, startMain } from './main-process.ts';
import { readMetrics } from './metrics.ts';
import { waitFor } from './wait.ts';

export interface Replica extends MainProcess {
  url: string;
  /** Metric samples by name (and labels, as printed: `name{shard="..."}`). */
  metrics(): Promise<Map<string, number>>;
  gql<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<{ data?: T; errors?: unknown[] }>;
}

/** The secret every replica of the tests seals its Redis entries with. */
export const TEST_REDIS_SECRET = 'replicas-of-the-tests-share-this-secret';

export async function startReplica(options: {
  table: string;
  redisUrl: string;
  leaseSeconds?: number;
  /** Another DynamoDB endpoint (an engine of the test's own); default the test run's. */
  endpoint?: string;
  env?: Record<string, string>;
}) {
  const main = startMain({
    AWS_ENDPOINT_URL_DYNAMODB: options.endpoint ?? inject('dynamodbEndpoint'),
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    RUNPLANE_TABLE: options.table,
    RUNPLANE_REDIS_URL: options.redisUrl,
    RUNPLANE_REDIS_SECRET: TEST_REDIS_SECRET,
    RUNPLANE_SHARD_LEASE_SECONDS: String(options.leaseSeconds ?? 4),
    RUNPLANE_GRAPHIQL: 'false',
    ...options.env,
  });
  await waitFor(() => /Runplane is up: (\S+)/.test(main.output()) || main.child.exitCode !== null, {
    timeoutMs: 60_000,
    what: 'a replica to start',
  });
  const url = /Runplane is up: (\S+)/.exec(main.output())?.[1];
  if (!url) throw new Error(`replica did not start:\n${main.output()}`);
  const replica: Replica = {
    ...main,
    url,
    metrics: () => readMetrics(url),
    async gql(query, variables = {}) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });
      return (await response.json()) as never;
    },
  };
  return replica;
}

/** How many of the stream's shards a replica reads now. */
export const shardsOwned = async (replica: Replica) => (await replica.metrics()).get('runplane_stream_shards_owned') ?? 0;

/** How many shards these replicas read together (one, when exactly one of them holds the stream's shard). */
export const shardsOwnedBy = async (replicas: Replica[]) => (await Promise.all(replicas.map(shardsOwned))).reduce((a, b) => a + b, 0);

/** Stops a replica: SIGTERM (graceful) or SIGKILL; resolves once it has exited. */
export async function stopReplica(replica: Replica, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM') {
  if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill(signal);
  await replica.exited;
}
