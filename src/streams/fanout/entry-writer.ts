/**
 * The sending side of the fan-out: each change as one sealed entry of the replicas' Redis
 * Stream, whole or as a notice (fanout/shares.ts decides which), appended with MAXLEN ~ so the
 * stream keeps its length (fanout/bounds.ts: its bound in bytes). It never waits: a change
 * that cannot go (Redis not connected, too many sends awaiting it, Redis refusing) is counted
 * as unsent, and the fan-out resyncs the others once Redis answers again.
 */
import type { Redis } from 'ioredis';
import type { Change } from '../changes.ts';
import { DEFAULT_STREAM_LENGTH } from './bounds.ts';
import { type EntryKind, sealEntry } from './entries.ts';
import { noticeOf, withoutRepeatedNotices } from './notices.ts';
import { EntryShares } from './shares.ts';

/** Sends awaiting Redis' answer; past it a change is not sent (the replica is degraded, and resyncs everyone once Redis answers). */
export const MAX_SENDS_IN_FLIGHT = 1_000;

export interface EntryWriterOptions {
  secret: string;
  replicaId: string;
  /** The largest change value sent whole, in bytes; a larger one goes as a notice. */
  entryBytes: number;
  /** Bytes each tenant may send each second (its changes past it go as notices), in bursts of BURST_SECONDS of it. */
  tenantBytesPerSecond: number;
  /** Entries the stream keeps (MAXLEN ~; default DEFAULT_STREAM_LENGTH). */
  maxLen?: number;
  maxSendsInFlight?: number;
  now?: () => number;
}

/** What the writer tells of its sends. */
export interface SendCounts {
  /** Entries Redis took. */
  onSent: (count: number) => void;
  /** Changes that could not be sent. */
  onUnsent: (count: number) => void;
}

export interface TurnEntry {
  kind: EntryKind;
  value: string;
}

export class EntryWriter {
  /** Entries sent (each gets the next count). */
  private sent = 0;
  /** This turn's entries, sent together once it ends (flush). */
  private turn: TurnEntry[] = [];
  private turnNotices = 0;
  /** Changes sent and not yet answered, or waiting for the end of this turn to be sent. */
  inFlight = 0;
  private readonly shares: EntryShares;
  private readonly maxLen: number;

  /** Writes to `key` on `redis` (the scope every seal is made for). */
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    private readonly options: EntryWriterOptions,
    private readonly counts: SendCounts,
  ) {
    this.shares = new EntryShares(options.entryBytes, options.tenantBytesPerSecond);
    this.maxLen = options.maxLen ?? DEFAULT_STREAM_LENGTH;
  }

  /** Changes sent as notices, by tenant and why. */
  get notices() {
    return this.shares.notices;
  }

  /** Sends a change, whole or as a notice, with the others of this turn. */
  publish(change: Change) {
    const { maxSendsInFlight = MAX_SENDS_IN_FLIGHT } = this.options;
    if (this.redis.status !== 'ready' || this.inFlight >= maxSendsInFlight) return this.counts.onUnsent(1);
    const value = this.shares.valueOf(change);
    this.inFlight++;
    if (value === undefined) this.turnNotices++;
    const entry: TurnEntry = value === undefined ? { kind: 'notice', value: noticeOf(change) } : { kind: 'change', value };
    if (this.turn.push(entry) === 1) queueMicrotask(() => this.flush());
  }

  /** One entry, sealed, on its own. */
  send(kind: EntryKind, value: string) {
    return this.redis.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', ...this.sealed(kind, value));
  }

  /**
   * Sends this turn's entries in one MULTI: Redis adds them at once, so another replica reading
   * along reads them in one XREAD and hands them to its feeds in one turn. The rows a transaction
   * updated (a cancel's run, claim and budget) then reach a runChanged subscriber there as one
   * state, as on this replica. Best effort: a reader an XREAD's count behind may split them.
   */
  private flush() {
    const taken = this.turn;
    // One notice of a thing per turn is enough: the reads it makes come after the whole turn is handled.
    const entries = this.turnNotices > 1 ? withoutRepeatedNotices(taken) : taken;
    this.turn = [];
    this.turnNotices = 0;
    const [first] = entries;
    const sent = entries.length === 1 && first ? this.send(first.kind, first.value) : this.sendTogether(entries);
    sent
      .then(
        () => this.counts.onSent(taken.length),
        () => this.counts.onUnsent(taken.length),
      )
      .finally(() => {
        this.inFlight -= taken.length;
      });
  }

  private async sendTogether(entries: TurnEntry[]) {
    const multi = this.redis.multi();
    for (const { kind, value } of entries) multi.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', ...this.sealed(kind, value));
    const results = await multi.exec();
    const failed = results === null ? new Error('the MULTI was discarded') : results.find(([err]) => err)?.[0];
    if (failed) throw failed;
  }

  /** The next entry's fields, sealed (each entry takes the next count). */
  private sealed(kind: EntryKind, value: string) {
    const { replicaId, secret, now = Date.now } = this.options;
    return sealEntry(secret, this.key, { from: replicaId, n: ++this.sent, at: now(), kind, value });
  }
}
