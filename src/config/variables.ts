/**
 * The environment variables the server reads: each one's check (a message naming what is
 * taken), its range and its default. Read by config.ts only, which turns them into the Config.
 */
import { z } from 'zod';
import {
  DEFAULT_IDEMPOTENCY_TTL_HOURS,
  DEFAULT_LEASE_RETENTION_DAYS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_RUN_RETENTION_DAYS,
  ID_PATTERN,
  MAX_INT,
  MAX_PAYLOAD_BYTES_LIMIT,
} from '../domain/limits.ts';
import { DEFAULT_MAX_OUTPUT_LENGTH, DEFAULT_OUTPUT_FLUSH_BYTES, DEFAULT_OUTPUT_FLUSH_MS, MAX_CHUNK_BYTES } from '../domain/output.ts';
import { parseKeys } from '../http/api-keys.ts';
import { isOrigin } from '../http/browsers.ts';
import {
  DEFAULT_ENTRY_BYTES,
  DEFAULT_STREAM_LENGTH,
  DEFAULT_TENANT_BYTES_PER_SECOND,
  MAX_ENTRY_BYTES,
  TRIM_NODE_ENTRIES,
} from '../streams/fanout/bounds.ts';

const portNumber = z
  .string()
  .regex(/^\d+$/, 'must be a whole number from 0 to 65535')
  .transform(Number)
  .refine((n) => n <= 65535, 'must be a whole number from 0 to 65535');
const port = (fallback: number) => portNumber.default(fallback);

/** The spellings every boolean variable takes, in any case (zod's stringbool; listed here, not left to its defaults, so the README and the error say what is taken). */
export const TRUE_SPELLINGS = ['true', '1', 'yes', 'on', 'y', 'enabled'] as const;
export const FALSE_SPELLINGS = ['false', '0', 'no', 'off', 'n', 'disabled'] as const;
const flag = z.stringbool({
  truthy: [...TRUE_SPELLINGS],
  falsy: [...FALSE_SPELLINGS],
  error: `must be true or false (${TRUE_SPELLINGS.map((t, i) => `${t}/${FALSE_SPELLINGS[i]}`).join(', ')}; any case)`,
});

const whole = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be a whole number from ${min} to ${max}`);

/** A comma-separated list, each entry checked by `item`. */
const list = (item: z.ZodString) =>
  z
    .string()
    .transform((value) =>
      value
        .split(',')
        .map((entry) => entry.trim())
        .filter(Boolean),
    )
    .pipe(z.array(item));

const endpoint = z
  .string()
  .url('must be a URL such as http://127.0.0.1:8000')
  .refine((u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL');

/** Every variable read, with its check and its default: what `loadConfig` parses the environment with. */
export const variables = z.object({
  PORT: port(4000),
  HOST: z.string().min(1, 'must not be empty').default('127.0.0.1'),
  RUNPLANE_TABLE: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{3,255}$/, 'must be a DynamoDB table name: 3 to 255 letters, digits, _ . -')
    .default('runplane'),
  AWS_ENDPOINT_URL_DYNAMODB: endpoint.optional(),
  AWS_ENDPOINT_URL_DYNAMODB_STREAMS: endpoint.optional(),
  AWS_REGION: z
    .string()
    .regex(/^[a-z0-9-]+$/, 'must be a region name such as us-east-1')
    .optional(),
  AWS_ACCESS_KEY_ID: z.string().optional(),
  AWS_SECRET_ACCESS_KEY: z.string().optional(),
  RUNPLANE_ENGINE_PORT: portNumber.optional(),
  RUNPLANE_ENGINE_ALLOWED_HOSTS: list(
    z.string().regex(/^[A-Za-z0-9.-]{1,253}$/, 'must be host names such as db.internal, comma-separated'),
  ).default([]),
  RUNPLANE_ENGINE_CORS: flag.default(false),
  RUNPLANE_DATA_DIR: z.string().min(1, 'must not be empty').default('.runplane/data'),
  RUNPLANE_IN_MEMORY: flag.default(false),
  RUNPLANE_ENGINE_PARTITION_LIMITS: flag.default(false),
  RUNPLANE_ENGINE_PARTITION_WCU: whole(1, 10_000_000).default(1_000),
  RUNPLANE_ENGINE_PARTITION_RCU: whole(1, 10_000_000).default(3_000),
  RUNPLANE_MAX_PAYLOAD_BYTES: z
    .string()
    .regex(/^\d+$/, `must be a whole number from 1 to ${MAX_PAYLOAD_BYTES_LIMIT}`)
    .transform(Number)
    .refine((n) => n >= 1 && n <= MAX_PAYLOAD_BYTES_LIMIT, `must be a whole number from 1 to ${MAX_PAYLOAD_BYTES_LIMIT}`)
    .default(DEFAULT_MAX_PAYLOAD_BYTES),
  NODE_ENV: z.string().optional(),
  RUNPLANE_GRAPHIQL: flag.optional(),
  RUNPLANE_CONSOLE: flag.optional(),
  RUNPLANE_INTROSPECTION: flag.optional(),
  RUNPLANE_API_KEYS: z
    .string()
    .superRefine((value, ctx) => {
      try {
        parseKeys(value, 'RUNPLANE_API_KEYS');
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^RUNPLANE_API_KEYS, /, '') });
      }
    })
    .optional(),
  RUNPLANE_API_KEYS_FILE: z.string().min(1, 'must not be empty').optional(),
  RUNPLANE_ALLOW_OPEN: flag.default(false),
  RUNPLANE_MAX_BODY_BYTES: whole(1024, 64 * 1024 * 1024).optional(),
  RUNPLANE_BODY_BYTES_IN_FLIGHT: whole(1024, 4 * 1024 * 1024 * 1024).optional(),
  RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT: whole(1024, 4 * 1024 * 1024 * 1024).optional(),
  RUNPLANE_CORS_ORIGINS: list(
    z.string().refine(isOrigin, 'must be origins such as https://app.example.com (scheme, host and port; no path), comma-separated'),
  ).default([]),
  RUNPLANE_ALLOWED_HOSTS: list(
    z.string().regex(/^[A-Za-z0-9.:-]{1,253}$/, 'must be host names or addresses such as runplane.internal, comma-separated'),
  ).default([]),
  RUNPLANE_DOCUMENT_CACHE_BYTES: whole(0, 4 * 1024 * 1024 * 1024).default(32 * 1024 * 1024),
  RUNPLANE_IDEMPOTENCY_TTL_HOURS: whole(1, 24 * 365).default(DEFAULT_IDEMPOTENCY_TTL_HOURS),
  RUNPLANE_RUN_RETENTION_DAYS: whole(1, 3650).default(DEFAULT_RUN_RETENTION_DAYS),
  RUNPLANE_LEASE_RETENTION_DAYS: whole(1, 3650).default(DEFAULT_LEASE_RETENTION_DAYS),
  RUNPLANE_CREATE_TABLE: flag.optional(),
  RUNPLANE_GROUP_COMMIT: flag.optional(),
  RUNPLANE_MAX_PAGE_SIZE: whole(1, 10_000).default(500),
  RUNPLANE_MAX_QUERY_COST: whole(100, 100_000_000).default(100_000),
  RUNPLANE_MAX_RESPONSE_BYTES: whole(64 * 1024, 1024 * 1024 * 1024).default(16 * 1024 * 1024),
  RUNPLANE_MAX_REQUEST_READS: whole(10, 10_000_000).default(1_000),
  RUNPLANE_READS_IN_FLIGHT: whole(1, 100_000).default(64),
  RUNPLANE_TENANT_READS_IN_FLIGHT: whole(1, 100_000).default(8),
  RUNPLANE_MAX_OUTPUT_STREAMS: whole(1, 10_000).default(64),
  RUNPLANE_COST_IN_FLIGHT: whole(100, 1_000_000_000).optional(),
  RUNPLANE_TENANT_COST_IN_FLIGHT: whole(100, 1_000_000_000).optional(),
  RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION: whole(1, 100_000).default(100),
  RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: whole(1, 10_000_000).default(2_000),
  RUNPLANE_MAX_CONNECTIONS_PER_TENANT: whole(1, 10_000_000).default(500),
  RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS: whole(0, 10_000_000).default(1_000),
  RUNPLANE_SUBSCRIBE_RATE: whole(1, 100_000).default(20),
  RUNPLANE_SEND_BUFFER_BYTES: whole(16 * 1024, 1024 * 1024 * 1024).default(1024 * 1024),
  RUNPLANE_REQUEST_TIMEOUT_SECONDS: whole(1, 3600).default(10),
  RUNPLANE_KEEP_ALIVE_SECONDS: whole(1, 3600).default(5),
  RUNPLANE_SEND_TIMEOUT_SECONDS: whole(1, 3600).default(60),
  RUNPLANE_CONNECTION_INIT_SECONDS: whole(1, 3600).default(3),
  RUNPLANE_WS_PING_SECONDS: whole(1, 3600).default(12),
  RUNPLANE_GAP_WAIT_SECONDS: whole(1, 86_400).default(30),
  RUNPLANE_STALL_CHECK_SECONDS: whole(1, 3600).default(5),
  RUNPLANE_OUTPUT_FLUSH_MS: whole(1, 60_000).default(DEFAULT_OUTPUT_FLUSH_MS),
  RUNPLANE_OUTPUT_FLUSH_BYTES: whole(1, MAX_CHUNK_BYTES).default(DEFAULT_OUTPUT_FLUSH_BYTES),
  RUNPLANE_MAX_OUTPUT_LENGTH: whole(1, MAX_INT).default(DEFAULT_MAX_OUTPUT_LENGTH),
  RUNPLANE_REDIS_URL: z
    .string()
    .url('must be a URL such as redis://127.0.0.1:6379')
    .refine((u) => !URL.canParse(u) || /^rediss?:$/.test(new URL(u).protocol), 'must be a redis:// or rediss:// URL')
    .optional(),
  RUNPLANE_REDIS_SECRET: z
    .string()
    .min(32, 'must be at least 32 characters (every replica of the table has the same one: openssl rand -hex 32)')
    .optional(),
  RUNPLANE_SHARD_LEASE_SECONDS: whole(2, 300).default(10),
  RUNPLANE_REDIS_ENTRY_BYTES: whole(1024, MAX_ENTRY_BYTES).default(DEFAULT_ENTRY_BYTES),
  RUNPLANE_REDIS_STREAM_LENGTH: whole(TRIM_NODE_ENTRIES, 10_000_000).default(DEFAULT_STREAM_LENGTH),
  RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND: whole(0, 1024 * 1024 * 1024).default(DEFAULT_TENANT_BYTES_PER_SECOND),
  RUNPLANE_REPLICA_ID: z.string().regex(ID_PATTERN, 'must be 1 to 128 letters, digits and . _ : - (not first)').optional(),
});
