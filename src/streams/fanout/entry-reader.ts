/**
 * The reading side of the fan-out: each entry read from the replicas' Redis Stream is opened
 * (fanout/entries.ts: sealed by a replica of this table, fresh, within its bound), checked
 * against its sender's count, and handed on: a change to the hub, a notice to be read from the
 * table (fanout/notices.ts), a heartbeat, a resync. What is not a replica's never reaches a
 * feed: it is dropped and counted.
 */
import type { Logger } from '../../lib/logger.ts';
import type { Change } from '../changes.ts';
import { MAX_ENTRY_BYTES } from './bounds.ts';
import { decodeChange } from './codec.ts';
import { type Dropped, DroppedEntries, type EntryRules, openEntry, SenderCounts } from './entries.ts';
import { beatOf, type Heartbeats } from './heartbeats.ts';
import { decodeNotice, type Notice } from './notices.ts';

/** An entry older than this is a replay (or a replica far behind): dropped, and the table re-read. */
const MAX_ENTRY_AGE_MS = 60_000;

export interface EntryReaderOptions {
  secret: string;
  /** The stream's key: the scope its entries are sealed for. */
  scope: string;
  replicaId: string;
  /** The largest entry value accepted (default MAX_ENTRY_BYTES: another replica's settings may be larger than this one's). */
  maxEntryBytes?: number;
  now?: () => number;
  heartbeats: Heartbeats;
  /** What the fan-out counts of what it reads. */
  counts: { consumed: number; lagMs: number; gaps: number; dropped: number };
  onChange: (change: Change) => void;
  onNotice: (notice: Notice) => void;
  /** Changes may have been missed: subscribers re-read from the table. */
  resync: (reason: string) => void;
  log: Logger;
}

export class EntryReader {
  private readonly rules: EntryRules;
  private readonly senders = new SenderCounts();
  private readonly drops: DroppedEntries;

  constructor(private readonly options: EntryReaderOptions) {
    const { secret, scope, maxEntryBytes = MAX_ENTRY_BYTES, now } = options;
    this.rules = { secret, scope, maxValueLength: maxEntryBytes, maxAgeMs: MAX_ENTRY_AGE_MS, now };
    this.drops = new DroppedEntries((line) => options.log.warn(line));
  }

  /** Entries dropped, by why. */
  get dropped() {
    return this.drops.byReason;
  }

  /** Hands on one read's entries (ids and fields as XREAD gives them, still as bytes). */
  handle(batch: [string, Buffer[]][]) {
    const { counts, replicaId, resync } = this.options;
    for (const [id, fields] of batch) {
      const entry = openEntry(fields, this.rules);
      if (typeof entry === 'string') {
        // Not a replica's (forged, altered, replayed, too large): it never reaches a feed.
        this.drop(entry);
        continue;
      }
      if (entry.from === replicaId) continue;
      const order = this.senders.check(entry.from, entry.n);
      if (order === 'repeat') {
        this.drop('repeat');
        continue;
      }
      counts.consumed++;
      counts.lagMs = Math.max(0, Date.now() - Number(id.split('-')[0]));
      if (order === 'gap') {
        // Some of its entries never arrived (dropped, deleted, unsent): what they said is in the table.
        counts.gaps++;
        resync(`entries from replica ${entry.from} were lost in Redis`);
      }
      if (entry.kind === 'beat') this.options.heartbeats.beat(entry.from, ...beatOf(entry.value));
      else if (entry.kind === 'resync') resync(`replica ${entry.from} could not send some changes`);
      else {
        let read: { change: Change } | { notice: Notice };
        try {
          read = entry.kind === 'notice' ? { notice: decodeNotice(entry.value) } : { change: decodeChange(entry.value) };
        } catch {
          // Sealed by a replica yet not a change this version reads (another version mid-upgrade): re-read from the table.
          this.drop('malformed');
          resync(`an entry of replica ${entry.from} could not be read`);
          continue;
        }
        if ('notice' in read) this.options.onNotice(read.notice);
        else this.options.onChange(read.change);
      }
    }
    this.drops.report();
  }

  private drop(why: Dropped | 'repeat') {
    this.drops.drop(why);
    this.options.counts.dropped++;
  }
}
