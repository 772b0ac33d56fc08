/** The flags of `npm run engine`, and what it reads from its environment. */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Credentials, EngineOptions } from './index.ts';

export const help = `Usage: npm run engine -- [flags]

Runs Runplane's embedded DynamoDB-compatible engine (DynamoDB and DynamoDB Streams
on one port). Point any AWS SDK or the AWS CLI at it with --endpoint-url.

Flags:
  --port N               port to listen on (default 8000; 0 picks a free one)
  --host ADDR            address to listen on (default 127.0.0.1)
  --data DIR             keep data in DIR across restarts (default .runplane/data)
  --in-memory            keep nothing on disk
  --region NAME          the engine's own region, for unsigned requests (default
                         AWS_REGION, else us-east-1); signed ones get their own
  --iterator-ttl DUR     shard iterator lifetime (default 15m)
  --stream-retention DUR how long stream records are kept (default 24h)
  --shard-max-age DUR    a shard closes and gets a child after this long (default 4h)
  --shard-max-records N  ... or after this many records (default 100000)
  --stream-cache-mb N    MiB of the newest stream records also kept in memory
                         (default 2); older ones are read from disk
  --ttl-interval DUR     how often expired items are looked for (default 10s)
  --ttl-delay DUR        how late after expiry items are deleted (default 0s)
  --lock-wait DUR        how long a request waits for an item held by another before
                         it is answered TransactionConflict (default 2s; 0s answers at
                         once, as DynamoDB does; 'forever' waits as long as it takes)
  --ttl-update-interval DUR
                         how long after one UpdateTimeToLive the next is refused
                         (default 1h, as DynamoDB; 0s allows switching TTL at will)
  --table-delay DUR      how long a new table stays CREATING (a changed one UPDATING,
                         a deleted one DELETING); item requests on it meanwhile are
                         answered ResourceNotFoundException (default 0s: ACTIVE at once)
  --allowed-hosts A,B    names a request's Host may give besides loopback names
                         (localhost, *.localhost, 127.x.x.x, [::1]) and the engine's
                         own address; any other Host is refused (DNS rebinding)
  --cors                 serve browsers (requests with an Origin), answering CORS for
                         any origin as DynamoDB does (off by default: refused)
  --partition-limits     throttle as DynamoDB does past its per-partition limits: each
                         partition key value of a table or global index takes at most
                         --partition-wcu write units (default 1000) and --partition-rcu
                         read units (default 3000) a second
  --partition-wcu N      write units a second per partition key value
  --partition-rcu N      read units a second per partition key value
  -h, --help             show this help

Durations take a unit: 500ms, 30s, 15m, 24h.

With AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in its environment, the engine checks
every request's SigV4 signature against them, as DynamoDB does; without them it accepts
any credentials, so any local process may use the port.
`;

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function duration(flag: string, value: string | undefined) {
  if (value === undefined) return undefined;
  const match = /^(\d+)(ms|s|m|h)$/.exec(value);
  if (!match) throw new Error(`--${flag} must be a duration such as 500ms, 30s, 15m or 24h (got "${value}")`);
  return Number(match[1]) * (units[match[2] as string] as number);
}

function integer(flag: string, value: string | undefined, min: number, max: number) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max)
    throw new Error(`--${flag} must be a whole number from ${min} to ${max} (got "${value}")`);
  return n;
}

const mebibytes = (n: number | undefined) => (n === undefined ? undefined : n * 1024 * 1024);

function regionName(value: string | undefined) {
  if (value === undefined) return undefined;
  if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(value)) throw new Error(`--region must be a region name such as eu-west-2 (got "${value}")`);
  return value;
}

function partitionLimits(values: { 'partition-limits'?: boolean; 'partition-wcu'?: string; 'partition-rcu'?: string }) {
  const writeUnits = integer('partition-wcu', values['partition-wcu'], 1, 10_000_000);
  const readUnits = integer('partition-rcu', values['partition-rcu'], 1, 10_000_000);
  if (!values['partition-limits']) {
    if (writeUnits !== undefined || readUnits !== undefined) throw new Error('--partition-wcu and --partition-rcu need --partition-limits');
    return undefined;
  }
  return { ...(writeUnits === undefined ? {} : { writeUnits }), ...(readUnits === undefined ? {} : { readUnits }) };
}

function hostNames(value: string | undefined) {
  if (value === undefined) return undefined;
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  if (names.length === 0 || names.some((name) => !/^[A-Za-z0-9.-]{1,253}$/.test(name))) {
    throw new Error(`--allowed-hosts must be host names such as engine or db.internal, comma-separated, without ports (got "${value}")`);
  }
  return names.map((name) => name.toLowerCase());
}

/** The credentials to check signatures against: both variables, or neither (an empty one is unset). */
export function credentialsFrom(env: Record<string, string | undefined>): Credentials | undefined {
  const accessKeyId = env.AWS_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY || undefined;
  if (accessKeyId && secretAccessKey) return { accessKeyId, secretAccessKey };
  if (accessKeyId || secretAccessKey) {
    throw new Error(
      `${accessKeyId ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'} is set without ${accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID'}: set both to require signatures made with them, or neither`,
    );
  }
  return undefined;
}

export function parseEngineArgs(argv: string[]): EngineOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      data: { type: 'string' },
      'in-memory': { type: 'boolean' },
      region: { type: 'string' },
      'iterator-ttl': { type: 'string' },
      'stream-retention': { type: 'string' },
      'shard-max-age': { type: 'string' },
      'shard-max-records': { type: 'string' },
      'stream-cache-mb': { type: 'string' },
      'ttl-interval': { type: 'string' },
      'ttl-delay': { type: 'string' },
      'ttl-update-interval': { type: 'string' },
      'lock-wait': { type: 'string' },
      'table-delay': { type: 'string' },
      cors: { type: 'boolean' },
      'allowed-hosts': { type: 'string' },
      'partition-limits': { type: 'boolean' },
      'partition-wcu': { type: 'string' },
      'partition-rcu': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return 'help';
  if (values['in-memory'] && values.data) throw new Error('--in-memory and --data exclude each other: choose one');
  return {
    port: integer('port', values.port, 0, 65535) ?? 8000,
    host: values.host ?? '127.0.0.1',
    dataDir: values['in-memory'] ? undefined : resolve(values.data ?? '.runplane/data'),
    region: regionName(values.region),
    iteratorTtlMs: duration('iterator-ttl', values['iterator-ttl']),
    streamRetentionMs: duration('stream-retention', values['stream-retention']),
    shardMaxAgeMs: duration('shard-max-age', values['shard-max-age']),
    shardMaxRecords: integer('shard-max-records', values['shard-max-records'], 1, 10_000_000),
    streamCacheBytes: mebibytes(integer('stream-cache-mb', values['stream-cache-mb'], 0, 65_536)),
    ttlSweepIntervalMs: duration('ttl-interval', values['ttl-interval']),
    ttlDeleteDelayMs: duration('ttl-delay', values['ttl-delay']),
    ttlUpdateIntervalMs: duration('ttl-update-interval', values['ttl-update-interval']),
    lockWaitMs: values['lock-wait'] === 'forever' ? Number.POSITIVE_INFINITY : duration('lock-wait', values['lock-wait']),
    createTableMs: duration('table-delay', values['table-delay']),
    cors: values.cors,
    allowedHosts: hostNames(values['allowed-hosts']),
    partitionLimits: partitionLimits(values),
  };
}
