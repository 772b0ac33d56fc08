/**
 * The event feed's decisions, without I/O: given its state and what just happened (a live
 * event, a page read from the table, a timer, the consumer draining), what it hands out
 * (event-order.ts), which state it is in next and what the driver (event-feed.ts) is to do:
 * read, look again later, pause, stall, fail, end (event-feed-effects.ts).
 */
import type { RunEvent, SeqRange } from '../domain/run.ts';
import { delayFor } from '../lib/backoff.ts';
import { Effect, type FeedState } from './event-feed-effects.ts';
import { EventOrder, type Outlet } from './event-order.ts';

export interface EventFeedMachineOptions {
  /** Hand out from afterSeq + 1 (reading the table first); absent: live from the run's end. */
  afterSeq?: number;
  types?: readonly string[];
  out: Outlet;
  /** How long a hole among live events may stay open before the table is asked. */
  holeGraceMs: number;
  /** How long a hole the table cannot fill is waited for before it is stepped over. */
  gapWaitMs: number;
  now?: () => number;
}

/** Pauses while the table cannot be read: the subscriber waits, it is not dropped. */
const TABLE_UNREACHABLE = { firstMs: 100, maxMs: 5_000 };

export class EventFeedMachine {
  private current: FeedState = 'starting';
  /** RECHECK's range. */
  range: SeqRange | undefined;
  /** LOOK's and PAUSE's delay. */
  delayMs = 0;
  /** REPORT's and FAIL's error. */
  error: unknown;

  /** What is handed out, in seq order. */
  private readonly order: EventOrder;
  /** What the driver has under way for this machine, besides the look timer (one at a time). */
  private outstanding: 'page' | 'recheck' | 'pause' | undefined;
  /** Asked to read while reading: once more when this read is done. */
  private again = false;
  /** This read stopped at a hole in the table it is still waiting for. */
  private holeOpen = false;
  private failures = 0;

  constructor(private readonly options: EventFeedMachineOptions) {
    this.order = new EventOrder(options.out, options.types, options.gapWaitMs, options.now);
  }

  get state(): FeedState {
    return this.current;
  }

  /** The next seq to hand out (once started). */
  get next() {
    return this.order.next;
  }

  /** The first effects: find the run's end, or read from afterSeq. */
  start(): number {
    if (this.current !== 'starting') return Effect.NONE;
    const { afterSeq } = this.options;
    if (afterSeq === undefined) return Effect.FIND_END;
    this.order.next = afterSeq + 1;
    return this.read();
  }

  /** The run's last seq, for a live-only feed. */
  found(lastSeq: number): number {
    if (this.current !== 'starting') return Effect.NONE;
    this.order.next = lastSeq + 1;
    this.current = 'live';
    if (!this.order.flush()) return this.fallBehind();
    // Changes may have been lost, or not be arriving, while the end was found: read on from it.
    if (this.again) return this.read();
    return this.order.held > 0 ? this.wait(this.options.holeGraceMs) : Effect.NONE;
  }

  /** A live event from the hub: in any order, possibly twice. */
  event(event: RunEvent): number {
    switch (this.current) {
      case 'ended':
      case 'behind':
        // Behind: the table has it, and is read once the consumer drains.
        return Effect.NONE;
      case 'starting':
        this.order.hold(event);
        return Effect.NONE;
      case 'live':
        if (event.seq < this.next) return this.late(event);
        // Nothing is pending while live: the event is the next one, or after a hole.
        if (event.seq === this.next) return this.order.deliver(event) ? Effect.NONE : this.fallBehind();
        this.order.hold(event);
        return this.wait(this.options.holeGraceMs);
      default:
        if (event.seq < this.next) return this.late(event);
        // Far behind a hole, the held events are dropped: the table has them all; read it instead.
        if (!this.order.hold(event)) return this.readSoon();
        // Waiting, the look timer is already set; reading, the read's end decides.
        return this.order.flush() ? Effect.NONE : this.fallBehind();
    }
  }

  /** The hub lost changes (a trimmed or replaced stream): read the table, stepped-over seqs too. */
  resync(): number {
    this.order.recheckLater();
    return this.readSoon();
  }

  /** Changes may not be arriving: read what is new in the table. */
  refill(): number {
    return this.readSoon();
  }

  /** The look timer fired. */
  look(): number {
    return this.current === 'waiting' ? this.read() : Effect.NONE;
  }

  /** The consumer took what was queued after a refusal, and the send buffer has room again. */
  drained(): number {
    if (this.current === 'ended' || this.current === 'starting') return Effect.NONE;
    this.order.recheckLater();
    if (this.current !== 'behind') return this.readSoon();
    if (this.outstanding === undefined) return Effect.CAUGHT_UP | this.read();
    // What is under way goes on (its page is used now), and then the table is read again.
    this.current = this.outstanding === 'pause' ? 'retrying' : 'reading';
    this.again = true;
    return Effect.CAUGHT_UP;
  }

  /** A page read from `next` on (`more`: the table has more after it). */
  page(events: readonly RunEvent[], more: boolean): number {
    if (!this.answered('page')) return Effect.NONE;
    for (const event of events) {
      if (event.seq < this.next) continue;
      if (this.order.holeBefore(event.seq)) {
        this.holeOpen = true;
        return this.readDone();
      }
      if (!this.order.deliver(event)) return this.fallBehind();
    }
    if (!more) return this.readDone();
    this.outstanding = 'page';
    return Effect.READ;
  }

  /** The send buffer was full when the read's turn came: nothing was read. */
  full(): number {
    if (!this.answered('page')) return Effect.NONE;
    return this.fallBehind() | Effect.STALL;
  }

  /** The rows of `range` (stepped-over seqs) found in the table. */
  rechecked(events: readonly RunEvent[]): number {
    if (!this.answered('recheck')) return Effect.NONE;
    for (const event of events) {
      const effects = this.late(event);
      if (effects !== Effect.NONE) return effects;
    }
    return this.recheck(this.order.nextRecheck());
  }

  /**
   * A read, the start, or handing out failed: always reported. A read is tried again after a
   * pause; a failed start ends the feed.
   */
  failed(err: unknown): number {
    this.error = err;
    if (this.current === 'starting') {
      this.current = 'ended';
      this.order.drop();
      return Effect.REPORT | Effect.FAIL | Effect.END;
    }
    // Reading, a failure while handing out the page counts as the read's.
    const reading = this.outstanding === 'page' || this.outstanding === 'recheck';
    if (this.current !== 'reading' && !(this.current === 'behind' && reading)) return Effect.REPORT;
    this.outstanding = 'pause';
    this.delayMs = delayFor(TABLE_UNREACHABLE, this.failures++);
    if (this.current === 'reading') this.current = 'retrying';
    return Effect.REPORT | Effect.PAUSE;
  }

  /** The pause after a failed read is over. */
  retry(): number {
    if (!this.answered('pause')) return Effect.NONE;
    return this.read();
  }

  /** The consumer stopped (return, end, or a failure it took). */
  close(): number {
    if (this.current === 'ended') return Effect.NONE;
    const effects = this.current === 'behind' ? Effect.END | Effect.CAUGHT_UP : Effect.END;
    this.current = 'ended';
    this.order.drop();
    this.outstanding = undefined;
    return effects;
  }

  /** What the machine holds, for tests and logs. */
  describe() {
    return {
      state: this.current,
      next: this.next,
      pending: this.order.heldSeqs(),
      outstanding: this.outstanding,
      again: this.again,
    };
  }

  /** An answer to what is outstanding: false (ignore it) when it is not, or the feed is behind or over. */
  private answered(what: 'page' | 'recheck' | 'pause') {
    if (this.outstanding !== what || this.current === 'ended') return false;
    this.outstanding = undefined;
    if (this.current === 'behind') return false;
    if (what !== 'pause') this.failures = 0;
    return true;
  }

  /** Starts a read: the stepped-over seqs first if due, then pages from `next` on. */
  private read(): number {
    this.current = 'reading';
    this.again = false;
    this.holeOpen = false;
    return this.recheck(this.order.firstRecheck());
  }

  /** Reads `range` of stepped-over seqs, or (none left) pages from `next` on. */
  private recheck(range: SeqRange | undefined): number {
    if (range === undefined) {
      this.outstanding = 'page';
      return Effect.READ;
    }
    this.range = range;
    this.outstanding = 'recheck';
    return Effect.RECHECK;
  }

  /** Something asks for a read: now, or once the one under way is done. */
  private readSoon(): number {
    switch (this.current) {
      case 'live':
        return this.read();
      case 'waiting':
        return Effect.CANCEL_LOOK | this.read();
      case 'reading':
      case 'retrying':
        this.again = true;
        return Effect.NONE;
      case 'starting':
        // It reads nothing yet: once it has found the run's end, it reads on from there.
        this.again = true;
        return Effect.NONE;
      default:
        // Behind: it reads once drained.
        return Effect.NONE;
    }
  }

  /** The read reached the table's end or a hole: read again, wait, or go live. */
  private readDone(): number {
    let lookMs = -1;
    // Seen live but not (any more) in the table, behind a hole: the same wait, then step over.
    if (this.holeOpen || this.order.livePastHole()) lookMs = this.order.holes.nextLook();
    if (!this.order.flush()) return this.fallBehind();
    if (this.again) return this.read();
    if (lookMs >= 0) return this.wait(lookMs);
    if (this.order.held > 0) return this.wait(this.options.holeGraceMs);
    this.current = 'live';
    return Effect.NONE;
  }

  private wait(ms: number): number {
    this.current = 'waiting';
    this.delayMs = ms;
    return Effect.LOOK;
  }

  /** The consumer cannot take more now: everything from `next` on is in the table; read it when it drains. */
  private fallBehind(): number {
    const effects = this.current === 'waiting' ? Effect.BEHIND | Effect.CANCEL_LOOK : Effect.BEHIND;
    this.current = 'behind';
    this.order.drop();
    return effects;
  }

  /** A seq below `next` (event-order.ts): refused, the feed falls behind. */
  private late(event: RunEvent): number {
    return this.order.late(event) ? Effect.NONE : this.fallBehind();
  }
}
