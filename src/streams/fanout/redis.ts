/**
 * Fan-out between replicas over one Redis Stream. A replica appends (XADD, MAXLEN bounded)
 * every change it learns of first: its own API writes at once, and the records of the stream
 * shards it holds. It reads every other replica's from the last id it read (XREAD), so a
 * short drop loses nothing. Redis is a fast path, not the record, and not trusted: every
 * entry is sealed with the replicas' secret and counted per sender (fanout/entries.ts), so a
 * forged, altered or replayed entry is dropped and a missing one sends subscribers to the
 * table. When this replica's link breaks, its sends fail, or a shard reader goes quiet
 * (fanout/heartbeats.ts), it is degraded; once that ends its subscribers re-read from the
 * table, and if it failed to send anything, a resync entry tells every other replica to do
 * the same.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../../lib/logger.ts';
import type { Change } from '../changes.ts';
import { decodeChange, encodeChange } from './codec.ts';
import { type Dropped, type EntryKind, openEntry, SenderCounts, sealEntry } from './entries.ts';
import { Heartbeats } from './heartbeats.ts';

/** Entries the stream keeps (about: trimmed by whole nodes); a replica further behind re-reads from the table. */
export const STREAM_MAX_LEN = 100_000;
/** Sends awaiting Redis' answer; past it a change is not sent (the replica is degraded, and resyncs everyone once Redis answers). */
export const MAX_SENDS_IN_FLIGHT = 1_000;
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
/** An entry older than this is a replay (or a replica far behind): dropped, and the table re-read. */
const MAX_ENTRY_AGE_MS = 60_000;
/** Dropped entries are told of at most once per this long (one log line, not one per entry). */
const DROP_LOG_MS = 10_000;

export interface FanoutOptions {
  url: string;
  /** The replicas' shared secret: every entry is sealed with it, and one without a valid seal is dropped. */
  secret: string;
  /** The largest entry value sent or accepted (a larger change is not sent: the others re-read from the table). */
  maxEntryBytes: number;
  /** Stream shards this replica reads now (told in its heartbeats). */
  shardsOwned: () => number;
  /** How long a shard lease lasts: a replica unheard for longer is gone. */
  shardLeaseMs: number;
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
  heartbeatMs?: number;
  now?: () => number;
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
  /** Changes sent and not yet answered, or waiting for the end of this turn to be sent. */
  private inFlight = 0;
  /** This turn's changes (encoded), sent together once it ends (flush). */
  private turn: string[] = [];
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Entries this replica has sent (each gets the next count). */
  private sent = 0;
  private readonly senders = new SenderCounts();
  private readonly heartbeats: Heartbeats;
  private beating: NodeJS.Timeout | undefined;
  private readonly dropsSinceLog: Partial<Record<Dropped | 'repeat', number>> = {};
  private dropLoggedAt = 0;
  readonly counts = { published: 0, unsent: 0, consumed: 0, resyncs: 0, lagMs: 0, dropped: 0, gaps: 0 };
  /** Entries dropped, by why. */
  readonly dropped: Record<Dropped | 'repeat', number> = { unauthenticated: 0, oversized: 0, malformed: 0, stale: 0, repeat: 0 };

  constructor(private readonly options: FanoutOptions) {
    this.key = `${options.prefix}:changes`;
    // No offline queue: a command while disconnected fails at once instead of piling up.
    const settings = { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => RETRY_MS };
    this.pub = new Redis(options.url, settings);
    this.sub = new Redis(options.url, settings);
    for (const client of [this.pub, this.sub]) client.on('error', () => {});
    this.heartbeats = new Heartbeats({
      boundMs: HEARTBEAT_BOUND_MS,
      forgetMs: options.shardLeaseMs + HEARTBEAT_BOUND_MS,
      now: options.now,
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
    return this.inFlight;
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
    this.send('beat', JSON.stringify({ shards })).catch(() => {
      this.counts.unsent++;
      this.unsent = true;
    });
  }

  /** Sends a change to the other replicas (never waits; a change that cannot go is counted and resynced). */
  publish(change: Change) {
    if (this.stopped) return;
    const limit = this.options.maxSendsInFlight ?? MAX_SENDS_IN_FLIGHT;
    const value = encodeChange(change);
    // Too large for an entry (an item written around the API can be): the others read it from the table.
    // Measured in bytes, as the receivers measure it (the Buffer Redis hands them).
    if (this.pub.status !== 'ready' || this.inFlight >= limit || Buffer.byteLength(value) > this.options.maxEntryBytes) {
      this.counts.unsent++;
      this.unsent = true;
      return;
    }
    this.inFlight++;
    if (this.turn.push(value) === 1) queueMicrotask(() => this.flush());
  }

  /**
   * Sends this turn's changes in one MULTI: Redis adds them at once, so another replica reading
   * along reads them in one XREAD and hands them to its feeds in one turn. The rows a transaction
   * updated (a cancel's run, claim and budget) then reach a runChanged subscriber there as one
   * state, as on this replica. Best effort: a reader READ_COUNT entries behind may split them.
   */
  private flush() {
    const values = this.turn;
    this.turn = [];
    const sent = values.length === 1 ? this.send('change', values[0] as string) : this.sendTogether(values);
    sent
      .then(
        () => {
          this.counts.published += values.length;
        },
        () => {
          this.counts.unsent += values.length;
          this.unsent = true;
        },
      )
      .finally(() => {
        this.inFlight -= values.length;
      });
  }

  private async sendTogether(values: string[]) {
    const multi = this.pub.multi();
    for (const value of values) multi.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', ...this.sealed('change', value));
    const results = await multi.exec();
    const failed = results === null ? new Error('the MULTI was discarded') : results.find(([err]) => err)?.[0];
    if (failed) throw failed;
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
      this.send('beat', JSON.stringify({ shards: 0, leaving: true })).catch(() => {}),
      new Promise((r) => setTimeout(r, 500)),
    ]);
    this.sub.disconnect();
    await this.loop;
    this.pub.disconnect();
  }

  private get maxLen() {
    return this.options.maxLen ?? STREAM_MAX_LEN;
  }

  /** The next entry's fields, sealed (each entry takes the next count). */
  private sealed(kind: EntryKind, value: string) {
    const entry = { from: this.options.replicaId, n: ++this.sent, at: (this.options.now ?? Date.now)(), kind, value };
    return sealEntry(this.options.secret, this.key, entry);
  }

  private send(kind: EntryKind, value: string) {
    return this.pub.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', ...this.sealed(kind, value));
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

  private handle(batch: [string, Buffer[]][]) {
    const rules = {
      secret: this.options.secret,
      scope: this.key,
      maxValueLength: this.options.maxEntryBytes,
      maxAgeMs: MAX_ENTRY_AGE_MS,
      now: this.options.now,
    };
    for (const [id, fields] of batch) {
      this.lastId = id;
      const entry = openEntry(fields, rules);
      if (typeof entry === 'string') {
        // Not a replica's (forged, altered, replayed, too large): it never reaches a feed.
        this.drop(entry);
        continue;
      }
      if (entry.from === this.options.replicaId) continue;
      const order = this.senders.check(entry.from, entry.n);
      if (order === 'repeat') {
        this.drop('repeat');
        continue;
      }
      this.counts.consumed++;
      this.counts.lagMs = Math.max(0, Date.now() - Number(id.split('-')[0]));
      if (order === 'gap') {
        // Some of its entries never arrived (dropped, deleted, unsent): what they said is in the table.
        this.counts.gaps++;
        this.resync(`entries from replica ${entry.from} were lost in Redis`);
      }
      if (entry.kind === 'beat') this.heartbeats.beat(entry.from, ...beatOf(entry.value));
      else if (entry.kind === 'resync') this.resync(`replica ${entry.from} could not send some changes`);
      else {
        let change: Change;
        try {
          change = decodeChange(entry.value);
        } catch {
          // Sealed by a replica yet not a change this version reads (another version mid-upgrade): re-read from the table.
          this.drop('malformed');
          this.resync(`an entry of replica ${entry.from} could not be read`);
          continue;
        }
        this.options.onChange(change);
      }
    }
    this.logDrops();
  }

  private drop(why: Dropped | 'repeat') {
    this.dropped[why]++;
    this.counts.dropped++;
    this.dropsSinceLog[why] = (this.dropsSinceLog[why] ?? 0) + 1;
  }

  /** One line per interval for the entries dropped in it. */
  private logDrops() {
    const now = Date.now();
    if (now - this.dropLoggedAt < DROP_LOG_MS) return;
    const said = Object.entries(this.dropsSinceLog).filter(([, n]) => n > 0);
    if (said.length === 0) return;
    this.dropLoggedAt = now;
    this.options.log.warn(
      `Redis: dropped ${said.map(([why, n]) => `${n} ${why}`).join(', ')} entries since the last report (not written by a replica of this table with its RUNPLANE_REDIS_SECRET, or repeated)`,
    );
    for (const [why] of said) this.dropsSinceLog[why as Dropped] = 0;
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

function compareIds(a: string, b: string) {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}

/** What a heartbeat says: the shards its sender reads (0 for anything else), and whether it is leaving. */
function beatOf(value: string): [shards: number, leaving: boolean] {
  try {
    const { shards, leaving } = JSON.parse(value) as { shards?: unknown; leaving?: unknown };
    return [typeof shards === 'number' && Number.isInteger(shards) && shards >= 0 ? shards : 0, leaving === true];
  } catch {
    return [0, false];
  }
}
