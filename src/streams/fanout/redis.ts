/**
 * Fan-out between replicas over one Redis Stream. A replica appends (XADD, MAXLEN bounded:
 * fanout/entry-writer.ts) every change it learns of first: its own API writes at once, and the
 * records of the stream shards it holds. It reads every other replica's from the last id it
 * read (XREAD: fanout/entry-reader.ts), so a short drop loses nothing. The stream is bounded in
 * bytes (fanout/bounds.ts): a change larger than an entry may be, or whose tenant is past its
 * share of the bytes sent (fanout/shares.ts), goes as a notice, and the replicas that receive
 * it read it from the table (fanout/notices.ts). Redis is a fast path, not the record, and not
 * trusted: every entry is sealed with the replicas' secret and counted per sender
 * (fanout/entries.ts), so a forged, altered or replayed entry is dropped and a missing one
 * sends subscribers to the table. When this replica's link breaks, its sends fail, or a shard reader goes quiet
 * (fanout/heartbeats.ts), it is degraded; once that ends its subscribers re-read from the
 * table, and if it failed to send anything, a resync entry tells every other replica to do
 * the same.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger.ts';
import type { Change } from '../changes.ts';
import { compareIds } from './entries.ts';
import { EntryReader } from './entry-reader.ts';
import { EntryWriter, type EntryWriterOptions } from './entry-writer.ts';
import { Heartbeats } from './heartbeats.ts';
import type { Notice } from './notices.ts';

export { MAX_SENDS_IN_FLIGHT } from './entry-writer.ts';

/** Entries one read takes (each held as bytes until its size is judged: a read holds at most this many). */
const READ_COUNT = 100;
/** How long one read waits for entries; a read unanswered for BLOCK_MS + READ_GRACE_MS means the link is gone. */
const BLOCK_MS = 1_000;
const READ_GRACE_MS = 2_000;
/** Pause between reads while Redis is unreachable. */
const RETRY_MS = 250;
/** How often a replica says it is alive (and how many shards it reads). */
export const HEARTBEAT_MS = 1_000;
/** A shard reader unheard for this long makes the others degraded. */
export const HEARTBEAT_BOUND_MS = 3_000;

export interface FanoutOptions extends EntryWriterOptions {
  url: string;
  /** The replicas' shared secret: every entry is sealed with it, and one without a valid seal is dropped. */
  secret: string;
  /** The largest entry value accepted from another replica (default MAX_ENTRY_BYTES: another's settings may be larger). */
  maxEntryBytes?: number;
  /** Stream shards this replica reads now (told in its heartbeats). */
  shardsOwned: () => number;
  /** How long a shard lease lasts: a replica unheard for longer is gone. */
  shardLeaseMs: number;
  /** Prefix of the keys: the replicas of one table share it. */
  prefix: string;
  replicaId: string;
  /** A change another replica sent. */
  onChange: (change: Change) => void;
  /** A change another replica sent as a notice: read it from the table. */
  onNotice: (notice: Notice) => void;
  /** Changes may have been missed: subscribers re-read from the table. */
  onResync: (reason: string) => void;
  log: Logger;
  heartbeatMs?: number;
}

export class RedisFanout {
  private readonly pub: Redis;
  private sub: Redis;
  private readonly key: string;
  private lastId = '$';
  /** Why this replica's link to Redis is down (undefined: it is up). */
  private broken: string | undefined;
  /** Changes not sent since the last resync entry. */
  private unsent = false;
  private readonly writer: EntryWriter;
  private readonly reader: EntryReader;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly heartbeats: Heartbeats;
  private beating: NodeJS.Timeout | undefined;
  readonly counts = { published: 0, unsent: 0, consumed: 0, resyncs: 0, lagMs: 0, dropped: 0, gaps: 0 };

  constructor(private readonly options: FanoutOptions) {
    this.key = `${options.prefix}:changes`;
    // No offline queue: a command while disconnected fails at once instead of piling up.
    const settings = { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => RETRY_MS };
    this.pub = new Redis(options.url, settings);
    this.sub = new Redis(options.url, settings);
    for (const client of [this.pub, this.sub]) client.on('error', () => {});
    this.writer = new EntryWriter(this.pub, this.key, options, {
      onSent: (count) => {
        this.counts.published += count;
      },
      onUnsent: (count) => {
        this.counts.unsent += count;
        this.unsent = true;
      },
    });
    this.heartbeats = new Heartbeats({
      boundMs: HEARTBEAT_BOUND_MS,
      forgetMs: options.shardLeaseMs + HEARTBEAT_BOUND_MS,
      now: options.now,
    });
    this.reader = new EntryReader({
      ...options,
      scope: this.key,
      heartbeats: this.heartbeats,
      counts: this.counts,
      resync: (reason) => this.resync(reason),
    });
  }

  /** Why the replica is degraded (its subscribers are filled from the table meanwhile), or undefined. */
  get degraded() {
    if (this.broken) return `Redis unreachable (${this.broken}): subscribers are filled from the table meanwhile`;
    if (this.unsent) return 'changes could not be sent to Redis: subscribers are filled from the table meanwhile';
    const silent = this.heartbeats.silent();
    if (silent.length > 0)
      return `no heartbeat through Redis from ${silent.slice(0, 3).join(', ')} (reading stream shards) for over ${HEARTBEAT_BOUND_MS} ms: subscribers are filled from the table meanwhile`;
    return undefined;
  }

  get sendsInFlight() {
    return this.writer.inFlight;
  }

  /** Entries dropped, by why. */
  get dropped() {
    return this.reader.dropped;
  }

  /** Changes sent as notices, by tenant and why. */
  get notices() {
    return this.writer.notices;
  }

  /** Connects and starts reading from the stream's newest entry; runs degraded (retrying) while Redis is unreachable. */
  async start() {
    try {
      await Promise.all([this.pub.connect(), this.sub.connect()]);
      const [newest] = await this.pub.xrevrangeBuffer(this.key, '+', '-', 'COUNT', 1);
      this.lastId = newest?.[0].toString() ?? '0-0';
    } catch (err) {
      this.breaks(err);
    }
    this.loop = this.consume();
    this.beat();
    this.beating = setInterval(() => this.beat(), this.options.heartbeatMs ?? HEARTBEAT_MS);
    this.beating.unref();
  }

  /** Says this replica is alive, and how many shards it reads; a beat that cannot go makes this replica degraded. */
  private beat(shards = this.options.shardsOwned()) {
    if (this.pub.status !== 'ready') return;
    this.writer.send('beat', JSON.stringify({ shards })).catch(() => {
      this.counts.unsent++;
      this.unsent = true;
    });
  }

  /** Sends a change to the other replicas, whole or as a notice (never waits; a change that cannot go is counted and resynced). */
  publish(change: Change) {
    if (!this.stopped) this.writer.publish(change);
  }

  /** Tells every other replica to re-read from the table (sent with the next read, retried until Redis takes it). */
  resyncOthers() {
    this.unsent = true;
  }

  /**
   * Live replicas, this one included: those whose sealed heartbeats were heard within `staleMs`
   * (nobody can add one without the secret); undefined while this replica cannot read Redis.
   */
  async replicas(staleMs: number) {
    return this.broken ? undefined : this.heartbeats.alive(staleMs).length + 1;
  }

  /** The ids of the other replicas alive (heard within `staleMs`). */
  async members(staleMs: number) {
    return this.heartbeats.alive(staleMs);
  }

  /** The connection this replica writes to Redis on (for what else it shares there). */
  get connection() {
    return this.pub;
  }

  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.beating);
    // Leaving: the others count one replica fewer at once, and expect no more beats from it.
    await Promise.race([
      this.writer.send('beat', JSON.stringify({ shards: 0, leaving: true })).catch(() => {}),
      new Promise((r) => setTimeout(r, 500)),
    ]);
    this.sub.disconnect();
    await this.loop;
    this.pub.disconnect();
  }

  private breaks(err: unknown) {
    if (!this.broken) this.options.log.warn(`Redis: link lost (${err instanceof Error ? err.message : String(err)}); degraded`);
    this.broken = err instanceof Error ? err.message || err.name : String(err);
  }

  private async consume() {
    while (!this.stopped) {
      let batch: [string, Buffer[]][];
      try {
        batch = await this.read();
      } catch (err) {
        if (this.stopped) return;
        this.breaks(err);
        await new Promise((r) => setTimeout(r, RETRY_MS));
        continue;
      }
      if (this.broken) {
        this.broken = undefined;
        this.options.log.info('Redis: link back; subscribers re-read from the table');
        this.resync('the link to Redis was down');
      }
      if (this.unsent && this.writer.inFlight === 0) {
        // Everyone re-reads what this replica could not send.
        await this.writer.send('resync', this.options.replicaId).then(
          () => {
            this.unsent = false;
          },
          () => {},
        );
      }
      const last = batch[batch.length - 1];
      if (last) this.lastId = last[0];
      this.reader.handle(batch);
      if (batch.length === READ_COUNT) await this.checkTrimmed(batch);
    }
  }

  /** One XREAD; one left unanswered past its block means the link is gone (reconnected afresh). */
  private async read(): Promise<[string, Buffer[]][]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.sub.disconnect(true);
        reject(new Error('a read went unanswered'));
      }, BLOCK_MS + READ_GRACE_MS);
    });
    try {
      // As bytes: an entry too large for a string (anyone may write one) must be judged by its length, not decoded.
      const reply = await Promise.race([
        this.sub.xreadBuffer('COUNT', READ_COUNT, 'BLOCK', BLOCK_MS, 'STREAMS', this.key, this.lastId),
        timeout,
      ]);
      const entries = (reply as [Buffer, [Buffer, Buffer[]][]][] | null)?.[0]?.[1] ?? [];
      return entries.map(([id, fields]) => [id.toString(), fields]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * After a full read (this replica is behind): if the read began at the oldest entry Redis still
   * keeps, or past it, entries before it may have been trimmed unread.
   */
  private async checkTrimmed(batch: [string, Buffer[]][]) {
    const first = batch[0]?.[0];
    const [oldest] = await this.sub.xrangeBuffer(this.key, '-', '+', 'COUNT', 1).catch(() => []);
    if (first && oldest && compareIds(oldest[0].toString(), first) >= 0) this.resync('it fell behind the stream kept in Redis');
  }

  private resync(reason: string) {
    this.counts.resyncs++;
    this.options.onResync(reason);
  }
}
