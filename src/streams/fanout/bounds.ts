/**
 * What the fan-out's Redis Stream may hold, in bytes. Every entry a replica writes is at most
 * its value's bound (RUNPLANE_REDIS_ENTRY_BYTES: a larger change goes as a notice, a few
 * hundred bytes) plus its other fields (sender, count, time, kind, seal: ENTRY_FIELDS_BYTES),
 * taken up to a quarter more by Redis' allocator (jemalloc's size classes); and the stream keeps
 * its length (RUNPLANE_REDIS_STREAM_LENGTH, XADD MAXLEN ~) plus at most one node of
 * TRIM_NODE_ENTRIES, as Redis trims whole nodes. So the stream holds at most
 * streamBound(length, entryBytes) whatever the tenants write: at the defaults 5,100 entries of
 * at most 10,880 bytes, 53 MiB. (Sends on their way are held by Redis too until it has taken
 * them: at most MAX_SENDS_IN_FLIGHT entries a replica, fanout/entry-writer.ts.)
 */

/** Entries the stream keeps, unless configured otherwise (a replica further behind re-reads from the table). */
export const DEFAULT_STREAM_LENGTH = 5_000;
/** The largest change value sent whole, unless configured otherwise. */
export const DEFAULT_ENTRY_BYTES = 8 * 1024;
/** The most an entry's value may be configured to (and the most a replica accepts from another: their settings may differ). */
export const MAX_ENTRY_BYTES = 1024 * 1024;
/** Bytes a tenant may send through Redis each second, per replica, unless configured otherwise (fanout/shares.ts). */
export const DEFAULT_TENANT_BYTES_PER_SECOND = 1024 * 1024;
/** An entry's fields besides its value, with Redis' keeping of them (node and listpack headers). */
export const ENTRY_FIELDS_BYTES = 512;
/** What Redis' allocator may add: jemalloc rounds an allocation up to a size class at most a quarter larger. */
const ALLOCATION_FACTOR = 1.25;
/** Entries in one node of a Redis Stream (stream-node-max-entries' default): MAXLEN ~ may keep this many more. */
export const TRIM_NODE_ENTRIES = 100;

/** The most one entry takes in Redis, its value at most `entryBytes` (measured: test/streams/redis-fanout.e2e.test.ts). */
export const entryBound = (entryBytes: number) => Math.ceil((entryBytes + ENTRY_FIELDS_BYTES) * ALLOCATION_FACTOR);

/** The most the stream holds, in bytes, keeping `length` entries of values at most `entryBytes` each. */
export const streamBound = (length: number, entryBytes: number) => (length + TRIM_NODE_ENTRIES) * entryBound(entryBytes);
