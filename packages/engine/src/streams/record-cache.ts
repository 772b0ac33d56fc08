/**
 * The stream records most recently committed, kept in memory so that readers at the tail
 * (the usual case: a poller a few hundred milliseconds behind) never touch the disk. Every
 * record is on disk anyway; this is a bounded copy of the newest. For each stream it holds
 * every committed record after a floor; a reader further back reads from disk.
 */
import type { StoredRecord } from './keys.ts';

/**
 * Bytes of records (by their SizeBytes, plus a fixed cost each) kept in memory. Past it the
 * oldest are dropped from memory: reading them takes a disk read instead. A second or two of
 * writes at a thousand a second, enough for a poller at the tail; a larger cache keeps each
 * record alive longer, so more of them reach V8's old generation and the heap swings wider
 * (8 MiB here cost about 30 MiB of RSS over a million writes, 2 MiB under 10).
 */
export const STREAM_CACHE_BYTES = 2 * 1024 * 1024;
/** What an entry costs besides its record's SizeBytes (keys, sequence number, object overhead), roughly. */
const ENTRY_OVERHEAD_BYTES = 300;

interface StreamEntries {
  /** Every committed record with a higher sequence number is in `entries`. */
  floor: number;
  /** Ascending by seq, from `head` on (the ones before were evicted; compacted now and then). */
  entries: StoredRecord[];
  head: number;
}

const sizeOf = (entry: StoredRecord) => entry.record.dynamodb.SizeBytes + ENTRY_OVERHEAD_BYTES;

export class RecordCache {
  private readonly streams = new Map<string, StreamEntries>();
  /** The stream of each entry, in the order they were added: eviction goes oldest first. */
  private order: string[] = [];
  private orderHead = 0;
  private bytes = 0;
  private hits = 0;
  private misses = 0;

  constructor(private readonly maxBytes = STREAM_CACHE_BYTES) {}

  /** Caches the stream's records after `floor` from now on (the ones up to it are read from disk). */
  open(arn: string, floor: number) {
    if (!this.streams.has(arn)) this.streams.set(arn, { floor, entries: [], head: 0 });
  }

  drop(arn: string) {
    const cached = this.streams.get(arn);
    if (!cached) return;
    for (let i = cached.head; i < cached.entries.length; i++) this.bytes -= sizeOf(cached.entries[i] as StoredRecord);
    this.streams.delete(arn);
  }

  /** A record whose batch has landed. One below the floor (committed late, evicted past) stays on disk only. */
  add(arn: string, entry: StoredRecord) {
    const cached = this.streams.get(arn);
    if (!cached || entry.seq <= cached.floor) return;
    const { entries } = cached;
    // Batches land nearly in order: look for the place from the end.
    let at = entries.length;
    while (at > cached.head && (entries[at - 1] as StoredRecord).seq > entry.seq) at--;
    entries.splice(at, 0, entry);
    this.order.push(arn);
    this.bytes += sizeOf(entry);
    while (this.bytes > this.maxBytes && this.evictOldest()) {}
  }

  /** Whether every committed record after `position` is in memory. */
  covers(arn: string, position: number) {
    const cached = this.streams.get(arn);
    const covered = cached !== undefined && position >= cached.floor;
    if (covered) this.hits++;
    else this.misses++;
    return covered;
  }

  /** Up to `limit` records with sequence numbers in (position, end]; call only when `covers` says so. */
  read(arn: string, position: number, end: number, limit: number) {
    const cached = this.streams.get(arn);
    if (!cached) return [];
    const { entries } = cached;
    let lo = cached.head;
    let hi = entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((entries[mid] as StoredRecord).seq <= position) lo = mid + 1;
      else hi = mid;
    }
    const found: StoredRecord[] = [];
    for (let i = lo; i < entries.length && found.length < limit; i++) {
      const entry = entries[i] as StoredRecord;
      if (entry.seq > end) break;
      found.push(entry);
    }
    return found;
  }

  stats() {
    let records = 0;
    for (const cached of this.streams.values()) records += cached.entries.length - cached.head;
    return { records, bytes: this.bytes, hits: this.hits, misses: this.misses };
  }

  private evictOldest() {
    while (this.orderHead < this.order.length) {
      const arn = this.order[this.orderHead++] as string;
      this.compactOrder();
      const cached = this.streams.get(arn);
      // A dropped stream's place in the order is skipped.
      if (!cached || cached.head >= cached.entries.length) continue;
      const oldest = cached.entries[cached.head++] as StoredRecord;
      cached.floor = oldest.seq;
      this.bytes -= sizeOf(oldest);
      if (cached.head > 1024 && cached.head * 2 > cached.entries.length) {
        cached.entries = cached.entries.slice(cached.head);
        cached.head = 0;
      }
      return true;
    }
    return false;
  }

  private compactOrder() {
    if (this.orderHead > 1024 && this.orderHead * 2 > this.order.length) {
      this.order = this.order.slice(this.orderHead);
      this.orderHead = 0;
    }
  }
}
