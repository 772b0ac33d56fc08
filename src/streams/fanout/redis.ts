/**
 * Fan-out between replicas over one Redis Stream. A replica appends (XADD, MAXLEN bounded)
 * every change it learns of first: its own API writes at once, and the records of the stream
 * shards it holds. It reads every other replica's from the last id it read (XREAD), so a
 * short drop loses nothing. Redis is a fast path, not the record: when this replica's link
 * breaks it is degraded; once the link is back its subscribers re-read from the table, and if
 * it failed to send anything, a resync entry tells every other replica to do the same.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger.ts';
import type { Change } from '../changes.ts';
import { decodeChange, encodeChange } from './codec.ts';

/** Entries the stream keeps (about: trimmed by whole nodes); a replica further behind re-reads from the table. */
export const STREAM_MAX_LEN = 100_000;
/** Sends awaiting Redis' answer; past it a change is not sent (the replica is degraded, and resyncs everyone once Redis answers). */
export const MAX_SENDS_IN_FLIGHT = 1_000;
/** Entries one read takes. */
const READ_COUNT = 500;
/** How long one read waits for entries; a read unanswered for BLOCK_MS + READ_GRACE_MS means the link is gone. */
const BLOCK_MS = 1_000;
const READ_GRACE_MS = 2_000;
/** Pause between reads while Redis is unreachable. */
const RETRY_MS = 250;

export interface FanoutOptions {
  url: string;
  /** Prefix of the keys: the replicas of one table share it. */
  prefix: string;
  replicaId: string;
  /** A change another replica sent. */
  onChange: (change: Change) => void;
  /** Changes may have been missed: subscribers re-read from the table. */
  onResync: (reason: string) => void;
  log: Logger;
  maxSendsInFlight?: number;
  maxLen?: number;
}

export class RedisFanout {
  private readonly pub: Redis;
  private sub: Redis;
  private readonly key: string;
  private readonly membersKey: string;
  private lastId = '$';
  /** Why this replica's link to Redis is down (undefined: it is up). */
  private broken: string | undefined;
  /** Changes not sent since the last resync entry. */
  private unsent = false;
  private inFlight = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  readonly counts = { published: 0, unsent: 0, consumed: 0, resyncs: 0, lagMs: 0 };

  constructor(private readonly options: FanoutOptions) {
    this.key = `${options.prefix}:changes`;
    this.membersKey = `${options.prefix}:replicas`;
    // No offline queue: a command while disconnected fails at once instead of piling up.
    const settings = { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => RETRY_MS };
    this.pub = new Redis(options.url, settings);
    this.sub = new Redis(options.url, settings);
    for (const client of [this.pub, this.sub]) client.on('error', () => {});
  }

  /** Why the replica is degraded, or undefined. */
  get degraded() {
    if (this.broken) return `Redis unreachable (${this.broken}): subscribers are filled from the table meanwhile`;
    if (this.unsent) return 'changes could not be sent to Redis: the other replicas will re-read from the table';
    return undefined;
  }

  get sendsInFlight() {
    return this.inFlight;
  }

  /** Connects and starts reading from the stream's newest entry; runs degraded (retrying) while Redis is unreachable. */
  async start() {
    try {
      await Promise.all([this.pub.connect(), this.sub.connect()]);
      const [newest] = await this.pub.xrevrange(this.key, '+', '-', 'COUNT', 1);
      this.lastId = newest?.[0] ?? '0-0';
    } catch (err) {
      this.breaks(err);
    }
    this.loop = this.consume();
  }

  /** Sends a change to the other replicas (never waits; a change that cannot go is counted and resynced). */
  publish(change: Change) {
    if (this.stopped) return;
    const limit = this.options.maxSendsInFlight ?? MAX_SENDS_IN_FLIGHT;
    if (this.pub.status !== 'ready' || this.inFlight >= limit) {
      this.counts.unsent++;
      this.unsent = true;
      return;
    }
    this.inFlight++;
    this.send('c', encodeChange(change))
      .then(
        () => this.counts.published++,
        () => {
          this.counts.unsent++;
          this.unsent = true;
        },
      )
      .finally(() => this.inFlight--);
  }

  /** Tells every other replica to re-read from the table (sent with the next read, retried until Redis takes it). */
  resyncOthers() {
    this.unsent = true;
  }

  /** Live replicas (this one included, and counted alive by this call); undefined when Redis does not answer. */
  async replicas(staleMs: number) {
    const now = Date.now();
    const [, , count] = (await this.pub
      .multi()
      .zadd(this.membersKey, now, this.options.replicaId)
      .zremrangebyscore(this.membersKey, '-inf', now - staleMs)
      .zcard(this.membersKey)
      .exec()
      .then((results) => results?.map(([err, value]) => (err ? undefined : value)))) ?? [undefined, undefined, undefined];
    return typeof count === 'number' ? count : undefined;
  }

  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    // Leaving: the others count one replica fewer at once.
    await Promise.race([this.pub.zrem(this.membersKey, this.options.replicaId).catch(() => {}), new Promise((r) => setTimeout(r, 500))]);
    this.sub.disconnect();
    await this.loop;
    this.pub.disconnect();
  }

  private send(kind: 'c' | 'resync', value: string) {
    const maxLen = this.options.maxLen ?? STREAM_MAX_LEN;
    return this.pub.xadd(this.key, 'MAXLEN', '~', maxLen, '*', 'from', this.options.replicaId, kind, value);
  }

  private breaks(err: unknown) {
    if (!this.broken) this.options.log.warn(`Redis: link lost (${err instanceof Error ? err.message : String(err)}); degraded`);
    this.broken = err instanceof Error ? err.message || err.name : String(err);
  }

  private async consume() {
    while (!this.stopped) {
      let batch: [string, string[]][];
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
      if (this.unsent && this.inFlight === 0) {
        // Everyone re-reads what this replica could not send.
        await this.send('resync', this.options.replicaId).then(
          () => {
            this.unsent = false;
          },
          () => {},
        );
      }
      this.handle(batch);
      if (batch.length === READ_COUNT) await this.checkTrimmed(batch);
    }
  }

  /** One XREAD; one left unanswered past its block means the link is gone (reconnected afresh). */
  private async read(): Promise<[string, string[]][]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.sub.disconnect(true);
        reject(new Error('a read went unanswered'));
      }, BLOCK_MS + READ_GRACE_MS);
    });
    try {
      const reply = await Promise.race([this.sub.xread('COUNT', READ_COUNT, 'BLOCK', BLOCK_MS, 'STREAMS', this.key, this.lastId), timeout]);
      return (reply as [string, [string, string[]][]][] | null)?.[0]?.[1] ?? [];
    } finally {
      clearTimeout(timer);
    }
  }

  private handle(batch: [string, string[]][]) {
    for (const [id, fields] of batch) {
      this.lastId = id;
      const [, from, kind, value] = fields;
      if (from === this.options.replicaId) continue;
      this.counts.consumed++;
      this.counts.lagMs = Math.max(0, Date.now() - Number(id.split('-')[0]));
      if (kind === 'resync') {
        this.resync(`replica ${value} could not send some changes`);
        continue;
      }
      try {
        this.options.onChange(decodeChange(String(value)));
      } catch (err) {
        this.options.log.warn(`Redis: entry ${id} skipped: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }

  /**
   * After a full read (this replica is behind): if the read began at the oldest entry Redis still
   * keeps, or past it, entries before it may have been trimmed unread.
   */
  private async checkTrimmed(batch: [string, string[]][]) {
    const first = batch[0]?.[0];
    const [oldest] = await this.sub.xrange(this.key, '-', '+', 'COUNT', 1).catch(() => []);
    if (first && oldest && compareIds(oldest[0], first) >= 0) this.resync('it fell behind the stream kept in Redis');
  }

  private resync(reason: string) {
    this.counts.resyncs++;
    this.options.onResync(reason);
  }
}

function compareIds(a: string, b: string) {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}
