/** What the API accepts. Every id that becomes part of a key is checked against these. */

/** The limits one request is held to (configured: RUNPLANE_MAX_*). */
export interface Limits {
  /** Largest event payload accepted, as UTF-8 JSON bytes. */
  readonly maxPayloadBytes: number;
  /** Largest `first`/`last` of any connection. */
  readonly maxPageSize: number;
  /** Largest cost of one operation, computed with its variables (see http/cost.ts). */
  readonly maxQueryCost: number;
  /** Largest response to one request: refused once reached, never built past it. */
  readonly maxResponseBytes: number;
  /** Table reads one request (or one event of a subscription) may make: the next one is refused. */
  readonly maxRequestReads: number;
  /** Output streams one run may have (Run.outputs reads each one's end). */
  readonly maxOutputStreams: number;
  /** The cost of the queries and mutations executing at once, in all and for one tenant (more wait their turn). */
  readonly costInFlight: number;
  readonly tenantCostInFlight: number;
}

/** Ids (runs, units, tenants): no '#', no control characters, so a key can never reach another partition. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const ID_RULE = '1 to 128 characters: letters, digits, and . _ : - (not first)';

/** Event types such as `tool.returned` or `model/responded`. */
export const EVENT_TYPE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
export const EVENT_TYPE_RULE = '1 to 128 characters: letters, digits, and . _ : / - (not first)';

/** GraphQL Int is 32-bit: every seq, amount and cap the API accepts fits in this. */
export const MAX_INT = 2_147_483_647;
/** Width of a zero-padded seq in a sort key: MAX_INT has 10 digits. */
export const SEQ_WIDTH = 10;

export const MAX_TASK_LENGTH = 4096;
/** A run's events may be spread over at most this many partition keys (each takes DynamoDB's per-partition throughput). */
export const MAX_EVENT_SHARDS = 16;
export const MAX_OWNER_LENGTH = 256;
/** Nesting DynamoDB allows in an attribute is 32; leave room for the item around the payload. */
export const MAX_PAYLOAD_DEPTH = 24;
export const DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024;
/**
 * DynamoDB's item limit is 400 KB, and a payload's stored size can be about 1.5 times its
 * JSON size (a list of small numbers); this keeps the largest allowed payload storable.
 */
export const MAX_PAYLOAD_BYTES_LIMIT = 256 * 1024;
export const MAX_LEASE_TTL_SECONDS = 7 * 24 * 3600;
/**
 * Fencing tokens never fall below the seconds since this moment. A lease row deleted by TTL
 * (long after its last use) restarts at the clock, above every token it ever issued.
 */
export const TOKEN_EPOCH_MS = Date.UTC(2025, 0, 1);
export const DEFAULT_IDEMPOTENCY_TTL_HOURS = 24;
export const DEFAULT_RUN_RETENTION_DAYS = 30;
export const DEFAULT_LEASE_RETENTION_DAYS = 30;
export const DEFAULT_PAGE_SIZE = 50;

/** DynamoDB stores numbers of magnitude 1e-130 up to (not including) 1e126, and 0. */
const storable = (n: number) => n === 0 || (Number.isFinite(n) && Math.abs(n) >= 1e-130 && Math.abs(n) < 1e126);

/** Whether a JSON value holds a number DynamoDB cannot store (Infinity from a literal like 1e400, 5e-324, 1e200). */
export function hasUnstorableNumber(value: unknown) {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current === 'number' && !storable(current)) return true;
    if (current !== null && typeof current === 'object') stack.push(...Object.values(current));
  }
  return false;
}

/** Whether a JSON value nests deeper than `max` (iterative: hostile input cannot blow the stack). */
export function nestsDeeperThan(value: unknown, max: number) {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * A payload key JavaScript gives a meaning of its own: assigning it sets an object's
 * prototype, so JSON libraries (the AWS SDK's marshaller among them) silently drop it.
 */
export const RESERVED_PAYLOAD_KEY = '__proto__';

/** Whether a JSON value holds an object with the key `__proto__` anywhere. */
export function hasReservedKey(value: unknown) {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (current === null || typeof current !== 'object') continue;
    if (!Array.isArray(current) && Object.hasOwn(current, RESERVED_PAYLOAD_KEY)) return true;
    stack.push(...Object.values(current));
  }
  return false;
}
