/**
 * Every key of the single table is built here and only here.
 *
 *   <tenant>#run#<runId>   #budget          the budget ledger
 *   <tenant>#run#<runId>   #claim           which worker holds the run (its fencing token)
 *   <tenant>#run#<runId>   #meta            run metadata
 *   <tenant>#run#<runId>   evt#0000000042   event 42 (a run of one event shard)
 *   <tenant>#run#<runId>#s2 evt#0000000042  event 42 of a run of 4 event shards (shard seq % 4)
 *   <tenant>#run#<runId>   ostream#<name>   an output stream: that it exists (and its end, once final)
 *   <tenant>#run#<runId>   out#<name>#0000000100  output text of stream <name> from code point 100
 *   <tenant>#unit#<unitId> lease            who holds the unit
 *   _sys#unit#<shardId>    lease            which replica reads a stream shard, and how far it has read
 *
 * '#' sorts before 'e', so one Query on a run's partition returns budget, metadata and
 * then its events in seq order, however many events there are; output sorts after them ('o').
 * Output stream names follow the event types' rule (no '#').
 *
 * A run created with eventShards > 1 keeps its head rows and output in its own partition and
 * spreads its events over that many others, each seq in exactly one (seq % shards), so the
 * put conditioned on its sort key being absent still lets only one writer have a seq.
 */
import { EVENT_TYPE_PATTERN, ID_PATTERN, MAX_EVENT_SHARDS, MAX_INT, SEQ_WIDTH } from '../domain/limits.ts';

export interface Key {
  pk: string;
  sk: string;
}

/**
 * The tenant of Runplane's own rows (stream shard leases). No API tenant can be it: tenants are
 * ids, and an id never starts with '_'.
 */
export const SYSTEM_TENANT = '_sys';

/** A key part that is not a valid id would let a caller address another partition: never build one. */
function part(kind: string, value: string) {
  if (kind === 'tenant' && value === SYSTEM_TENANT) return value;
  if (!ID_PATTERN.test(value)) throw new Error(`invalid ${kind} id for a key: ${JSON.stringify(value)}`);
  return value;
}

const EVENT_PREFIX = 'evt#';
export const RUN_META_SK = '#meta';
export const RUN_BUDGET_SK = '#budget';
export const RUN_CLAIM_SK = '#claim';
/** Live claims are listed by when they run out, table-wide, over this many index partitions (the stall watcher reads them). */
export const CLAIM_INDEX_SHARDS = 4;
/** Width of a claim's end (epoch ms) in its index sort key: lexical order is time order. */
const CLAIM_TIME_WIDTH = 15;
export const LEASE_SK = 'lease';
/** Runs are spread over this many GSI partitions per tenant (and status), so no listing key runs hot. */
export const RUN_LIST_SHARDS = 4;

const OUTPUT_PREFIX = 'out#';
const OUTPUT_STREAM_PREFIX = 'ostream#';

/** An output stream's name as a key part: an event type's rule, so it has no '#'. */
function streamPart(stream: string) {
  if (!EVENT_TYPE_PATTERN.test(stream)) throw new Error(`invalid output stream name for a key: ${JSON.stringify(stream)}`);
  return stream;
}

/** The sort key of a stream's chunk starting at code point `offset`. */
export function outputSk(stream: string, offset: number) {
  if (!Number.isSafeInteger(offset) || offset < 0 || offset > MAX_INT) throw new Error(`offset out of range: ${offset}`);
  return `${OUTPUT_PREFIX}${streamPart(stream)}#${String(offset).padStart(SEQ_WIDTH, '0')}`;
}

/** The stream and offset in a chunk's sort key, or undefined for any other row. */
export function outputOfSk(sk: string) {
  const match = /^out#([^#]+)#(\d{10})$/.exec(sk);
  return match ? { stream: match[1] as string, offset: Number(match[2]) } : undefined;
}

/** The stream named by an output stream row's sort key, or undefined for any other row. */
export const outputStreamOfSk = (sk: string) => (sk.startsWith(OUTPUT_STREAM_PREFIX) ? sk.slice(OUTPUT_STREAM_PREFIX.length) : undefined);

export function eventSk(seq: number) {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq > MAX_INT) throw new Error(`seq out of range: ${seq}`);
  return EVENT_PREFIX + String(seq).padStart(SEQ_WIDTH, '0');
}

export const keys = {
  runPartition: (tenant: string, runId: string) => `${part('tenant', tenant)}#run#${part('run', runId)}`,
  run: (tenant: string, runId: string): Key => ({ pk: keys.runPartition(tenant, runId), sk: RUN_META_SK }),
  budget: (tenant: string, runId: string): Key => ({ pk: keys.runPartition(tenant, runId), sk: RUN_BUDGET_SK }),
  claim: (tenant: string, runId: string): Key => ({ pk: keys.runPartition(tenant, runId), sk: RUN_CLAIM_SK }),
  /** The index partition of live claims in one shard (Runplane's own: no tenant can list it). */
  claimShard: (shard: number) => `${SYSTEM_TENANT}#claims#${shard}`,
  /** Index keys of a live claim: by when it runs out, so the stall watcher reads the expired first. */
  claimListing: (tenant: string, runId: string, untilMs: number) => ({
    gsi1pk: keys.claimShard(shardOf(`${tenant}#${runId}`)),
    gsi1sk: `${claimTime(untilMs)}#${part('tenant', tenant)}#${part('run', runId)}`,
  }),
  /** The index sort key bound of claims that ran out by `atMs`. */
  claimsEndedBy: (atMs: number) => `${claimTime(atMs)}#~`,
  /** The partition holding the run's event `seq`. */
  eventPartition: (tenant: string, runId: string, seq: number, shards = 1) =>
    shards === 1 ? keys.runPartition(tenant, runId) : `${keys.runPartition(tenant, runId)}#s${seq % eventShards(shards)}`,
  /** Every partition holding the run's events, shard 0 first. */
  eventPartitions: (tenant: string, runId: string, shards = 1) =>
    shards === 1
      ? [keys.runPartition(tenant, runId)]
      : Array.from({ length: eventShards(shards) }, (_, shard) => `${keys.runPartition(tenant, runId)}#s${shard}`),
  event: (tenant: string, runId: string, seq: number, shards = 1): Key => ({
    pk: keys.eventPartition(tenant, runId, seq, shards),
    sk: eventSk(seq),
  }),
  outputChunk: (tenant: string, runId: string, stream: string, offset: number): Key => ({
    pk: keys.runPartition(tenant, runId),
    sk: outputSk(stream, offset),
  }),
  outputStream: (tenant: string, runId: string, stream: string): Key => ({
    pk: keys.runPartition(tenant, runId),
    sk: `${OUTPUT_STREAM_PREFIX}${streamPart(stream)}`,
  }),
  /** Sort-key bounds of a stream's chunks, and of a run's stream rows. */
  outputChunks: (stream: string) => ({ first: outputSk(stream, 0), last: outputSk(stream, MAX_INT) }),
  outputStreams: { first: OUTPUT_STREAM_PREFIX, last: `${OUTPUT_STREAM_PREFIX}~` },
  /** A sort key past every event and output row of a run. */
  afterOutput: 'out~',
  lease: (tenant: string, unitId: string): Key => ({ pk: `${part('tenant', tenant)}#unit#${part('unit', unitId)}`, sk: LEASE_SK }),
  idempotency: (tenant: string, key: string): Key => ({ pk: `${part('tenant', tenant)}#idem#${part('idempotency', key)}`, sk: 'idem' }),
  /** A key no row ever has: reading it tells whether the table answers (readiness). */
  probe: { pk: '_ready', sk: '_ready' } as Key,
  /** Sort-key bounds of a run's events, for Query ranges. */
  events: { first: eventSk(0), last: eventSk(MAX_INT) },
  /** GSI partition keys: all runs of a tenant in one shard, and its runs in one status. */
  runShard: (tenant: string, shard: number) => `${part('tenant', tenant)}#runs#${shard}`,
  runStatusShard: (tenant: string, status: string, shard: number) => `${part('tenant', tenant)}#runs#${status}#${shard}`,
  /** The listing index's partition of a tenant's units in one shard (lease rows share the runs' index, on keys of their own). */
  unitShard: (tenant: string, shard: number) => `${part('tenant', tenant)}#units#${shard}`,
  /** Listing-index keys of a lease row: a tenant's units by id, spread like runs. */
  leaseListing: (tenant: string, unitId: string) => ({ gsi1pk: keys.unitShard(tenant, shardOf(unitId)), gsi1sk: part('unit', unitId) }),
  /** GSI keys of a run's metadata row: all runs of a tenant, and runs by status, newest first. */
  runListing(tenant: string, runId: string, status: string, createdAt: string) {
    const shard = shardOf(runId);
    const sort = `${createdAt}#${runId}`;
    return {
      gsi1pk: keys.runShard(tenant, shard),
      gsi1sk: sort,
      gsi2pk: keys.runStatusShard(tenant, status, shard),
      gsi2sk: sort,
    };
  },
};

/** The seq in an event's sort key, or undefined for any other row. */
export function seqOfSk(sk: string) {
  if (!sk.startsWith(EVENT_PREFIX)) return undefined;
  const seq = Number(sk.slice(EVENT_PREFIX.length));
  return Number.isSafeInteger(seq) ? seq : undefined;
}

/** A shard count a key may be built from: never one that would address a partition no reader looks at. */
function eventShards(shards: number) {
  if (!Number.isSafeInteger(shards) || shards < 1 || shards > MAX_EVENT_SHARDS) throw new Error(`invalid event shard count: ${shards}`);
  return shards;
}

/**
 * The run id and tenant in a run partition key (its own, or one of its event shards': then
 * `shard` too), or undefined for any other partition.
 */
export function parseRunPartition(pk: string): { tenant: string; runId: string; shard?: number } | undefined {
  const match = /^([^#]+)#run#([^#]+)(?:#s(\d{1,2}))?$/.exec(pk);
  if (!match) return undefined;
  return match[3] === undefined
    ? { tenant: match[1] as string, runId: match[2] as string }
    : { tenant: match[1] as string, runId: match[2] as string, shard: Number(match[3]) };
}

const claimTime = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(CLAIM_TIME_WIDTH, '0');

/** A stable small hash (FNV-1a) picks the listing shard. */
function shardOf(id: string) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % RUN_LIST_SHARDS;
}
