/** The engine's options and their defaults. */
import type { PartitionLimits } from './capacity/index.ts';
import { MAX_WAITERS_PER_ITEM } from './item-locks.ts';
import type { Credentials } from './sigv4.ts';
import { STREAM_CACHE_BYTES } from './streams/record-cache.ts';
import { MAX_PENDING_TOKENS } from './transactions/tokens.ts';

export interface EngineOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** Address to listen on (default 127.0.0.1). */
  host?: string;
  /** LevelDB folder for data that outlives the process; in memory when absent. */
  dataDir?: string;
  /**
   * The engine's own region: ARNs are stored with it, and requests that do not say theirs
   * (in-process calls, unsigned requests) are answered in it. Default: AWS_REGION,
   * AWS_DEFAULT_REGION, else us-east-1. Signed requests are answered in their signing region.
   */
  region?: string;
  /** The clock for stream records, iterator expiry and TTL (tests move it instead of sleeping). */
  now?: () => number;
  /** Shard iterator lifetime (default 15 minutes, as DynamoDB). */
  iteratorTtlMs?: number;
  /** Stream record retention (default 24 hours, as DynamoDB). */
  streamRetentionMs?: number;
  /** A shard closes and gets a child after this long (default 4 hours). */
  shardMaxAgeMs?: number;
  /** ... or after this many records (default 100,000). */
  shardMaxRecords?: number;
  /**
   * Bytes of the newest stream records (by SizeBytes) also kept in memory for readers at
   * the tail (default 2 MiB). Records are on disk (or in the in-memory store) either way;
   * older ones are read from there.
   */
  streamCacheBytes?: number;
  /** How often expired items are looked for (default 10 s). */
  ttlSweepIntervalMs?: number;
  /** How late after its expiry an item is deleted (default 0). */
  ttlDeleteDelayMs?: number;
  /**
   * How long after one UpdateTimeToLive on a table the next is refused with a
   * ValidationException (default 1 hour, as DynamoDB). 0 lets TTL be switched on and off
   * at will, for local use.
   */
  ttlUpdateIntervalMs?: number;
  /**
   * How long a new table stays CREATING (and a changed or deleted one UPDATING or DELETING)
   * before it is ACTIVE or gone (default 0: at once). Meanwhile item requests on it are
   * answered ResourceNotFoundException, as DynamoDB answers them.
   */
  createTableMs?: number;
  /**
   * Serve browsers, answering their CORS requests as DynamoDB does, for any origin (default
   * false: a request with an Origin header, a preflight included, is refused, so no web page
   * can use the port).
   */
  cors?: boolean;
  /**
   * Names a request's Host may give besides loopback names (`localhost`, `*.localhost`,
   * `127.x.x.x`, `::1`) and the address it reached the engine at; any other is refused, so a
   * page cannot reach the port by a name of its own rebound to this machine (default none).
   */
  allowedHosts?: readonly string[];
  /**
   * Requests over HTTP must be signed (SigV4) with these, as DynamoDB checks them (default:
   * any credentials are accepted). In-process calls are not signed.
   */
  credentials?: Credentials;
  /** How refusals name the settings that would serve a refused request (default the flags of `npm run engine`). */
  settingNames?: { allowedHosts: string; cors: string };
  /**
   * How long a request waits for the locks of the items it touches before it is answered
   * as DynamoDB answers contention: TransactionCanceledException with reason
   * TransactionConflict for transactions, TransactionConflictException for single writes
   * (default 2 s; 0 answers at once as DynamoDB does; Infinity waits as long as it takes,
   * for deterministic tests).
   */
  lockWaitMs?: number;
  /**
   * DynamoDB's per-partition throughput limits (off by default): each partition key value of
   * a table or global index takes `writeUnits` write units (default 1,000) and `readUnits`
   * read units (default 3,000) a second, spending at most `burstSeconds` (default 1) of them
   * at once; past that a request is throttled as DynamoDB throttles it. `true` for the defaults.
   * Time is the engine's clock (`now`), so tests move it instead of sleeping.
   */
  partitionLimits?: boolean | Partial<PartitionLimits>;
  /** Bounds of the engine's queues and caches; the defaults suit a server, tests lower them to reach them. */
  limits?: Partial<Limits>;
  /** Where unexpected internal errors are reported (default console.error). */
  onError?: (err: unknown) => void;
}

export interface Limits {
  /** Requests that may wait for one item's lock; one more is answered TransactionConflict at once. */
  lockWaitersPerItem: number;
  /** Transactions with a ClientRequestToken in flight at once; one more is answered ThrottlingException. */
  pendingTokens: number;
}

const MINUTE = 60_000;

/** DynamoDB's per-partition maximums. */
export const PARTITION_WRITE_UNITS = 1_000;
export const PARTITION_READ_UNITS = 3_000;

function partitionLimits(given: EngineOptions['partitionLimits']): PartitionLimits | undefined {
  if (!given) return undefined;
  const limits = { writeUnits: PARTITION_WRITE_UNITS, readUnits: PARTITION_READ_UNITS, burstSeconds: 1, ...(given === true ? {} : given) };
  for (const [name, value] of Object.entries(limits)) {
    if (!(value > 0 && Number.isFinite(value))) throw new Error(`partitionLimits.${name} must be a positive number, got ${value}`);
  }
  return limits;
}

/** The options with every default filled in. */
export function withDefaults(options: EngineOptions) {
  return {
    port: options.port ?? 0,
    host: options.host ?? '127.0.0.1',
    dataDir: options.dataDir,
    region: options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
    now: options.now ?? Date.now,
    iteratorTtlMs: options.iteratorTtlMs ?? 15 * MINUTE,
    stream: {
      retentionMs: options.streamRetentionMs ?? 24 * 60 * MINUTE,
      shardMaxAgeMs: options.shardMaxAgeMs ?? 4 * 60 * MINUTE,
      shardMaxRecords: options.shardMaxRecords ?? 100_000,
      cacheBytes: options.streamCacheBytes ?? STREAM_CACHE_BYTES,
    },
    ttl: {
      sweepIntervalMs: options.ttlSweepIntervalMs ?? 10_000,
      deleteDelayMs: options.ttlDeleteDelayMs ?? 0,
      updateIntervalMs: options.ttlUpdateIntervalMs ?? 60 * MINUTE,
    },
    createTableMs: options.createTableMs ?? 0,
    cors: options.cors ?? false,
    allowedHosts: options.allowedHosts ?? [],
    credentials: options.credentials,
    settingNames: options.settingNames ?? { allowedHosts: '--allowed-hosts', cors: '--cors' },
    lockWaitMs: options.lockWaitMs ?? 2_000,
    partitionLimits: partitionLimits(options.partitionLimits),
    limits: { lockWaitersPerItem: MAX_WAITERS_PER_ITEM, pendingTokens: MAX_PENDING_TOKENS, ...options.limits },
    onError: options.onError ?? ((err: unknown) => console.error('engine: unexpected error', err)),
  };
}

export type Settings = ReturnType<typeof withDefaults>;
