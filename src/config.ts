/** The only reader of process.env: validated once at start, with a message naming any bad value. */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { variables } from './config/variables.ts';
import type { Limits } from './domain/limits.ts';
import type { ConnectionLimits } from './http/connections.ts';

export interface Config {
  /** What start-up says before it serves: RUNPLANE_* variables the server does not read, by name. */
  readonly warnings: readonly string[];
  readonly port: number;
  readonly host: string;
  readonly table: string;
  readonly dynamodb: {
    /** No endpoint configured: run the embedded engine in this process. */
    readonly embedded: boolean;
    readonly endpoint?: string;
    readonly streamsEndpoint?: string;
    readonly region: string;
    /** Create the table when missing: the embedded engine or a loopback endpoint only. */
    readonly createTable: boolean;
    /** Local endpoints accept any credentials; real AWS uses the SDK's default chain. */
    readonly localCredentials: boolean;
  };
  readonly engine: {
    /** Absent: no port; the engine answers this process only. */
    readonly port?: number;
    /** Host names its port serves besides loopback ones, whether it serves browsers, whose signatures it requires. */
    readonly allowedHosts: readonly string[];
    readonly cors: boolean;
    readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
    /** Absent: in memory. */
    readonly dataDir?: string;
    /** DynamoDB's per-partition throughput limits in the embedded engine (absent: off). */
    readonly partitionLimits?: { readonly writeUnits: number; readonly readUnits: number };
  };
  readonly limits: Limits;
  /** Table reads in flight for requests and feeds, in all and per tenant (store/read-shares.ts). */
  readonly reads: { readonly total: number; readonly perTenant: number };
  /** What one client may hold open, and how long it may take to send. */
  readonly connections: ConnectionLimits;
  /** How long a run's live feed waits for a missing seq before it says so and moves on. */
  readonly gapWaitMs: number;
  /** How often the stall watcher looks for claims that ran out. */
  readonly stallCheckMs: number;
  /** Live output: stored at most every flushMs or flushBytes per stream; a stream at most maxLength code points. */
  readonly output: { flushMs: number; flushBytes: number; maxLength: number };
  /** This process's name as a holder of system leases (the stall watcher's). */
  readonly processId: string;
  readonly retention: { readonly idempotencySeconds: number; readonly finishedRunSeconds: number; readonly leaseSeconds: number };
  readonly graphiql: boolean;
  /** Serve the run console at `/`. */
  readonly console: boolean;
  readonly introspection: boolean;
  /** NODE_ENV=production: GraphiQL, introspection and field suggestions off unless asked for. */
  readonly production: boolean;
  readonly auth: { readonly inline?: string; readonly file?: string };
  readonly maxBodyBytes: number;
  /** Request bodies being read at once, in bytes, in all and for one tenant (http/body-shares.ts). */
  readonly bodiesInFlight: { readonly total: number; readonly perTenant: number };
  /** Browsers: origins served besides the server's own, and (open, without keys) the names it answers to besides loopback ones. */
  readonly browsers: { readonly corsOrigins: readonly string[]; readonly allowedHosts: readonly string[] };
  /** Parsed documents kept for reuse, in (estimated) heap bytes; a tenant holds at most a quarter. */
  readonly documentCacheBytes: number;
  /** Write concurrent appends to one run together, in one transaction. */
  readonly groupCommit: boolean;
  /** Several replicas on one table: Redis for fan-out, stream shards read by lease (absent: one server alone). */
  readonly replicas?: {
    readonly redisUrl: string;
    /** Seals every entry the replicas write to Redis; entries without its seal are dropped. */
    readonly redisSecret: string;
    readonly replicaId: string;
    readonly shardLeaseSeconds: number;
    /** The largest change sent whole through Redis; a larger one goes as a notice (read from the table). */
    readonly entryBytes: number;
    /** Entries the Redis Stream keeps: with entryBytes, its bound in bytes (streams/fanout/bounds.ts). */
    readonly streamLength: number;
    /** Bytes each tenant may send through Redis each second, per replica; past it its changes go as notices. */
    readonly tenantBytesPerSecond: number;
  };
}

export class ConfigError extends Error {}

const isLoopback = (url: string) => {
  const { hostname } = new URL(url);
  return hostname === 'localhost' || hostname === '[::1]' || /^127\./.test(hostname);
};

/** What the embedded engine's port checks signatures against: both variables, or neither. */
function engineCredentials(accessKeyId: string | undefined, secretAccessKey: string | undefined) {
  if (accessKeyId && secretAccessKey) return { accessKeyId, secretAccessKey };
  if (accessKeyId || secretAccessKey)
    throw new ConfigError(
      `bad configuration:\n  ${accessKeyId ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'} is set without ${accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID'}: set both (the embedded engine's port then requires requests signed with them), or neither`,
    );
  return undefined;
}

/** Variables Runplane's client and CLIs read, which the server never does. */
const CLIENT_VARIABLES: Record<string, string> = {
  RUNPLANE_API_KEY: "a client's key (the CLIs read it); the server reads its keys from RUNPLANE_API_KEYS or RUNPLANE_API_KEYS_FILE",
  RUNPLANE_URL: 'where the CLIs find a server; the server listens on HOST and PORT',
};

/** Read outside the config: RUNPLANE_DEBUG by main.ts; the rest by this repository's tests and tools. */
const READ_ELSEWHERE = new Set([
  'RUNPLANE_DEBUG',
  'RUNPLANE_PROCESS_BUNDLES',
  'RUNPLANE_REQUIRE_BROWSER',
  'RUNPLANE_REQUIRE_REDIS',
  'RUNPLANE_CHROMIUM',
  'RUNPLANE_SCREENSHOTS',
]);

/** One line for each RUNPLANE_* variable set that the server does not read, naming it, never its value. */
function unreadVariables(given: Record<string, unknown>): string[] {
  const read = new Set(Object.keys(variables.shape));
  return Object.keys(given)
    .filter((name) => name.startsWith('RUNPLANE_') && !read.has(name) && !READ_ELSEWHERE.has(name) && !name.startsWith('RUNPLANE_TEST_'))
    .sort()
    .map(
      (name) =>
        `${name} is set but the server does not read it: ${CLIENT_VARIABLES[name] ?? 'no such setting (README, Configuration, lists them)'}`,
    );
}

export function loadConfig(source: Record<string, string | undefined>): Config {
  const given = Object.fromEntries(Object.entries(source).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = variables.safeParse(given);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const name = String(issue.path[0]);
      return `  ${name}=${JSON.stringify(given[name])}: ${issue.message}`;
    });
    throw new ConfigError(`bad configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  // Room for the largest payload, JSON-escaped, and the query around it.
  const maxBodyBytes = e.RUNPLANE_MAX_BODY_BYTES ?? Math.max(1024 * 1024, 4 * e.RUNPLANE_MAX_PAYLOAD_BYTES);
  // Room for the largest body beside others: one that needed the pool empty would wait behind a steady flow of small ones.
  const bodiesTotal = Math.max(e.RUNPLANE_BODY_BYTES_IN_FLIGHT ?? 8 * maxBodyBytes, maxBodyBytes);
  const production = e.NODE_ENV === 'production';
  const openByDefault = !e.RUNPLANE_API_KEYS && !e.RUNPLANE_API_KEYS_FILE;
  if (production && openByDefault && !e.RUNPLANE_ALLOW_OPEN) {
    throw new ConfigError(
      'bad configuration:\n  NODE_ENV=production with no API keys would serve every caller as one tenant: set RUNPLANE_API_KEYS or RUNPLANE_API_KEYS_FILE, or RUNPLANE_ALLOW_OPEN=true to run open on purpose',
    );
  }
  if (e.RUNPLANE_REDIS_URL && !e.RUNPLANE_REDIS_SECRET) {
    throw new ConfigError(
      'bad configuration:\n  RUNPLANE_REDIS_URL is set without RUNPLANE_REDIS_SECRET: replicas trust only Redis entries sealed with a secret they share (at least 32 characters, the same on every replica: openssl rand -hex 32)',
    );
  }
  // Unique per process even when two are given one name: two holders by one name would both read a shard.
  const replicaId = `${
    e.RUNPLANE_REPLICA_ID ??
    (hostname()
      .replace(/[^A-Za-z0-9._:-]/g, '-')
      .slice(0, 80) ||
      'replica')
  }-${process.pid}-${randomBytes(3).toString('hex')}`;
  const endpoint = e.AWS_ENDPOINT_URL_DYNAMODB;
  const local = !endpoint || isLoopback(endpoint);
  return {
    warnings: unreadVariables(given),
    port: e.PORT,
    host: e.HOST,
    table: e.RUNPLANE_TABLE,
    dynamodb: {
      embedded: !endpoint,
      endpoint,
      streamsEndpoint: e.AWS_ENDPOINT_URL_DYNAMODB_STREAMS,
      region: e.AWS_REGION ?? 'us-east-1',
      createTable: e.RUNPLANE_CREATE_TABLE ?? local,
      localCredentials: local && !e.AWS_ACCESS_KEY_ID,
    },
    engine: {
      port: e.RUNPLANE_ENGINE_PORT,
      allowedHosts: e.RUNPLANE_ENGINE_ALLOWED_HOSTS,
      cors: e.RUNPLANE_ENGINE_CORS,
      // Only a port takes signed requests: in process, nothing is signed.
      credentials:
        !endpoint && e.RUNPLANE_ENGINE_PORT !== undefined ? engineCredentials(e.AWS_ACCESS_KEY_ID, e.AWS_SECRET_ACCESS_KEY) : undefined,
      dataDir: e.RUNPLANE_IN_MEMORY ? undefined : resolve(e.RUNPLANE_DATA_DIR),
      partitionLimits: e.RUNPLANE_ENGINE_PARTITION_LIMITS
        ? { writeUnits: e.RUNPLANE_ENGINE_PARTITION_WCU, readUnits: e.RUNPLANE_ENGINE_PARTITION_RCU }
        : undefined,
    },
    limits: {
      maxPayloadBytes: e.RUNPLANE_MAX_PAYLOAD_BYTES,
      maxPageSize: e.RUNPLANE_MAX_PAGE_SIZE,
      maxQueryCost: e.RUNPLANE_MAX_QUERY_COST,
      maxResponseBytes: e.RUNPLANE_MAX_RESPONSE_BYTES,
      maxRequestReads: e.RUNPLANE_MAX_REQUEST_READS,
      maxOutputStreams: e.RUNPLANE_MAX_OUTPUT_STREAMS,
      // Room for four operations as costly as the limit at once, one of them a tenant's.
      costInFlight: e.RUNPLANE_COST_IN_FLIGHT ?? 4 * e.RUNPLANE_MAX_QUERY_COST,
      tenantCostInFlight: Math.min(
        e.RUNPLANE_TENANT_COST_IN_FLIGHT ?? e.RUNPLANE_MAX_QUERY_COST,
        e.RUNPLANE_COST_IN_FLIGHT ?? 4 * e.RUNPLANE_MAX_QUERY_COST,
      ),
    },
    reads: { total: e.RUNPLANE_READS_IN_FLIGHT, perTenant: Math.min(e.RUNPLANE_TENANT_READS_IN_FLIGHT, e.RUNPLANE_READS_IN_FLIGHT) },
    connections: {
      maxSubscriptionsPerConnection: e.RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION,
      maxSubscriptionsPerTenant: e.RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT,
      maxConnectionsPerTenant: e.RUNPLANE_MAX_CONNECTIONS_PER_TENANT,
      maxConnectionsPerAddress: e.RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS,
      subscribeRate: e.RUNPLANE_SUBSCRIBE_RATE,
      sendBufferBytes: e.RUNPLANE_SEND_BUFFER_BYTES,
      requestTimeoutMs: e.RUNPLANE_REQUEST_TIMEOUT_SECONDS * 1000,
      keepAliveTimeoutMs: e.RUNPLANE_KEEP_ALIVE_SECONDS * 1000,
      sendTimeoutMs: e.RUNPLANE_SEND_TIMEOUT_SECONDS * 1000,
      connectionInitTimeoutMs: e.RUNPLANE_CONNECTION_INIT_SECONDS * 1000,
      pingIntervalMs: e.RUNPLANE_WS_PING_SECONDS * 1000,
    },
    gapWaitMs: e.RUNPLANE_GAP_WAIT_SECONDS * 1000,
    stallCheckMs: e.RUNPLANE_STALL_CHECK_SECONDS * 1000,
    output: { flushMs: e.RUNPLANE_OUTPUT_FLUSH_MS, flushBytes: e.RUNPLANE_OUTPUT_FLUSH_BYTES, maxLength: e.RUNPLANE_MAX_OUTPUT_LENGTH },
    processId: replicaId,
    retention: {
      idempotencySeconds: e.RUNPLANE_IDEMPOTENCY_TTL_HOURS * 3600,
      finishedRunSeconds: e.RUNPLANE_RUN_RETENTION_DAYS * 86400,
      leaseSeconds: e.RUNPLANE_LEASE_RETENTION_DAYS * 86400,
    },
    graphiql: e.RUNPLANE_GRAPHIQL ?? !production,
    console: e.RUNPLANE_CONSOLE ?? true,
    introspection: e.RUNPLANE_INTROSPECTION ?? !production,
    production,
    auth: { inline: e.RUNPLANE_API_KEYS, file: e.RUNPLANE_API_KEYS_FILE },
    maxBodyBytes,
    bodiesInFlight: { total: bodiesTotal, perTenant: Math.min(e.RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT ?? maxBodyBytes, bodiesTotal) },
    documentCacheBytes: e.RUNPLANE_DOCUMENT_CACHE_BYTES,
    browsers: { corsOrigins: e.RUNPLANE_CORS_ORIGINS, allowedHosts: e.RUNPLANE_ALLOWED_HOSTS },
    groupCommit: e.RUNPLANE_GROUP_COMMIT ?? true,
    replicas: e.RUNPLANE_REDIS_URL
      ? {
          redisUrl: e.RUNPLANE_REDIS_URL,
          redisSecret: e.RUNPLANE_REDIS_SECRET as string,
          replicaId,
          shardLeaseSeconds: e.RUNPLANE_SHARD_LEASE_SECONDS,
          entryBytes: e.RUNPLANE_REDIS_ENTRY_BYTES,
          streamLength: e.RUNPLANE_REDIS_STREAM_LENGTH,
          tenantBytesPerSecond: e.RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND,
        }
      : undefined,
  };
}
