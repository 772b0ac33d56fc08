/**
 * The event feed's decisions, without I/O: given its state and what just happened (a live
 * event, a page read from the table, a timer, the consumer draining), what it hands out, which
 * state it is in next and what the driver (event-feed.ts) is to do: read, look again later,
 * pause, stall, fail, end.
 *
 * States:
 * - starting: a live-only feed asking where the run ends; live events are kept meanwhile.
 * - reading: a table read is in flight (catching up from afterSeq, filling a hole, reading on
 *   after a lag, or looking again for stepped-over seqs); live events at `next` are still
 *   handed out, others kept.
 * - retrying: the table could not be read; pausing before reading again.
 * - live: at the end of the table; each live event is handed out as it comes.
 * - waiting: a hole before something known (in the table or among live events); the table is
 *   looked at again when the look timer fires, and the hole is stepped over after `gapWaitMs`.
 * - behind: the consumer cannot take more (its queue or its connection's send buffer is full);
 *   nothing is kept, the table holds it all; reading on once the consumer drains.
 * - ended: the consumer stopped, or the start failed.
 *
 * Each input returns its effects as bits (`Effect`), with their arguments on the machine
 * (`next`, `range`, `delayMs`, `error`): no allocation per event beyond what is handed out.
 * Handing out is the one synchronous output: `out.push` takes the event or refuses it.
 */
import type { DeliveredEvent, RunEvent, SeqRange } from '../domain/run.ts';
import { delayFor } from '../lib/backoff.ts';
import { Holes } from './holes.ts';

export type FeedState = 'starting' | 'reading' | 'retrying' | 'live' | 'waiting' | 'behind' | 'ended';

/** What the driver is to do after an input; bits, so one input can ask for several. */
export const Effect = {
  NONE: 0,
  /** Ask the table for the run's last seq; answer `found` or `failed`. */
  FIND_END: 1,
  /** Read a page from `next` on, unless the send buffer is full; answer `page`, `full` or `failed`. */
  READ: 2,
  /** Read the stepped-over seqs of `range`; answer `rechecked` or `failed`. */
  RECHECK: 4,
  /** Start the look timer for `delayMs`; answer `look`. */
  LOOK: 8,
  /** Stop the look timer. */
  CANCEL_LOOK: 16,
  /** Pause `delayMs` after a failed read; answer `retry`. */
  PAUSE: 32,
  /** Tell the consumer's queue that nothing comes until it drains; answered by `drained`. */
  STALL: 64,
  /** Report `error` (the feed goes on). */
  REPORT: 128,
  /** End the consumer's stream with `error`. */
  FAIL: 256,
  /** The feed fell behind (one more lagging feed). */
  BEHIND: 512,
  /** The feed is no longer behind. */
  CAUGHT_UP: 1024,
  /** The feed is over: let go of the hub and the timers. */
  END: 2048,
} as const;

/** Where handed-out events go: true if taken, false if the consumer cannot take it now. */
export interface Outlet {
  push(event: DeliveredEvent): boolean;
}

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

/** Live events held ahead of a hole; past this they are dropped and read from the table once it closes. */
export const MAX_PENDING = 1_000;
/** Pauses while the table cannot be read: the subscriber waits, it is not dropped. */
const TABLE_UNREACHABLE = { firstMs: 100, maxMs: 5_000 };

const NO_RANGES: readonly SeqRange[] = [];

export class EventFeedMachine {
  private current: FeedState = 'starting';
  /** The next seq to hand out (once started). */
  next = 0;
  /** RECHECK's range. */
  range: SeqRange | undefined;
  /** LOOK's and PAUSE's delay. */
  delayMs = 0;
  /** REPORT's and FAIL's error. */
  error: unknown;

  private readonly wanted: Set<string> | undefined;
  private readonly holes: Holes;
  /** Live events ahead of `next`. */
  private readonly pending = new Map<number, RunEvent>();
  /** What the driver has under way for this machine, besides the look timer (one at a time). */
  private outstanding: 'page' | 'recheck' | 'pause' | undefined;
  /** Asked to read while reading: once more when this read is done. */
  private again = false;
  /** This read stopped at a hole in the table it is still waiting for. */
  private holeOpen = false;
  /** Look for stepped-over seqs in the table at the next read (after a lag or a resync). */
  private recheckDue = false;
  private rechecking: readonly SeqRange[] = NO_RANGES;
  private recheckAt = 0;
  private failures = 0;

  constructor(private readonly options: EventFeedMachineOptions) {
    this.wanted = options.types?.length ? new Set(options.types) : undefined;
    this.holes = new Holes(options.gapWaitMs, options.now);
  }

  get state(): FeedState {
    return this.current;
  }

  /** The first effects: find the run's end, or read from afterSeq. */
  start(): number {
    if (this.current !== 'starting') return Effect.NONE;
    const { afterSeq } = this.options;
    if (afterSeq === undefined) return Effect.FIND_END;
    this.next = afterSeq + 1;
    return this.read();
  }

  /** The run's last seq, for a live-only feed. */
  found(lastSeq: number): number {
    if (this.current !== 'starting') return Effect.NONE;
    this.next = lastSeq + 1;
    this.current = 'live';
    if (!this.flush()) return this.fallBehind();
    // Changes may have been lost, or not be arriving, while the end was found: read on from it.
    if (this.again) return this.read();
    return this.pending.size > 0 ? this.wait(this.options.holeGraceMs) : Effect.NONE;
  }

  /** A live event from the hub: in any order, possibly twice. */
  event(event: RunEvent): number {
    switch (this.current) {
      case 'ended':
      case 'behind':
        // Behind: the table has it, and is read once the consumer drains.
        return Effect.NONE;
      case 'starting':
        this.pending.set(event.seq, event);
        if (this.pending.size > MAX_PENDING) this.pending.clear();
        return Effect.NONE;
      case 'live':
        if (event.seq < this.next) return this.late(event);
        // Nothing is pending while live: the event is the next one, or after a hole.
        if (event.seq === this.next) return this.deliver(event) ? Effect.NONE : this.fallBehind();
        this.pending.set(event.seq, event);
        return this.wait(this.options.holeGraceMs);
      default:
        if (event.seq < this.next) return this.late(event);
        this.pending.set(event.seq, event);
        if (this.pending.size > MAX_PENDING) {
          // Far behind a hole: the table has all of these; drop them and read it instead.
          this.pending.clear();
          return this.readSoon();
        }
        // Waiting, the look timer is already set; reading, the read's end decides.
        return this.flush() ? Effect.NONE : this.fallBehind();
    }
  }

  /** The hub lost changes (a trimmed or replaced stream): read the table, stepped-over seqs too. */
  resync(): number {
    this.recheckDue = this.holes.hasSteppedOver;
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
    this.recheckDue = this.holes.hasSteppedOver;
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
      if (event.seq > this.next && !this.holes.stepOver(this.next, event.seq)) {
        this.holeOpen = true;
        return this.readDone();
      }
      if (!this.deliver(event)) return this.fallBehind();
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
    this.recheckAt++;
    if (this.recheckAt < this.rechecking.length) {
      this.range = this.rechecking[this.recheckAt];
      this.outstanding = 'recheck';
      return Effect.RECHECK;
    }
    this.rechecking = NO_RANGES;
    this.outstanding = 'page';
    return Effect.READ;
  }

  /**
   * A read, the start, or handing out failed: always reported. A read is tried again after a
   * pause; a failed start ends the feed.
   */
  failed(err: unknown): number {
    this.error = err;
    if (this.current === 'starting') {
      this.current = 'ended';
      this.pending.clear();
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
    this.pending.clear();
    this.outstanding = undefined;
    return effects;
  }

  /** What the machine holds, for tests and logs. */
  describe() {
    return {
      state: this.current,
      next: this.next,
      pending: [...this.pending.keys()].sort((a, b) => a - b),
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
    if (this.recheckDue) {
      this.recheckDue = false;
      const ranges = this.holes.steppedOver;
      if (ranges.length > 0) {
        this.rechecking = ranges;
        this.recheckAt = 0;
        this.range = ranges[0];
        this.outstanding = 'recheck';
        return Effect.RECHECK;
      }
    }
    this.outstanding = 'page';
    return Effect.READ;
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
    if (this.holeOpen || this.livePastHole()) lookMs = this.holes.nextLook();
    if (!this.flush()) return this.fallBehind();
    if (this.again) return this.read();
    if (lookMs >= 0) return this.wait(lookMs);
    if (this.pending.size > 0) return this.wait(this.options.holeGraceMs);
    this.current = 'live';
    return Effect.NONE;
  }

  /** Whether live events wait behind a hole the table did not fill (and it is still waited for). */
  private livePastHole() {
    if (this.pending.size === 0) return false;
    let known = Number.POSITIVE_INFINITY;
    for (const seq of this.pending.keys()) if (seq < known) known = seq;
    if (known <= this.next) return false;
    if (!this.holes.stepOver(this.next, known)) return true;
    // Waited for long enough: on to the first seq seen live, which is handed out saying what is missing.
    this.next = known;
    return false;
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
    this.pending.clear();
    return effects;
  }

  /** Hands out the pending events that follow `next` without a hole; false if the consumer refused one. */
  private flush(): boolean {
    if (this.pending.size === 0) return true;
    for (const seq of this.pending.keys()) if (seq < this.next) this.pending.delete(seq);
    for (let event = this.pending.get(this.next); event; event = this.pending.get(this.next)) {
      this.pending.delete(event.seq);
      if (!this.deliver(event)) return false;
    }
    return true;
  }

  /** Hands out the event at `next`; false (and `next` stays) if the consumer refused it. */
  private deliver(event: RunEvent): boolean {
    this.next = event.seq + 1;
    this.holes.filled();
    if (this.wanted && !this.wanted.has(event.type)) return true;
    if (!this.options.out.push(this.holes.announce(event))) {
      this.next = event.seq;
      return false;
    }
    this.holes.announced();
    return true;
  }

  /** A seq below `next`: a duplicate, or a stepped-over seq found at last (handed out now, marked late). */
  private late(event: RunEvent): number {
    if (!this.holes.takeLate(event.seq)) return Effect.NONE;
    if (this.wanted && !this.wanted.has(event.type)) return Effect.NONE;
    if (this.options.out.push({ ...event, late: true })) return Effect.NONE;
    // Refused: stepped over again, so looked for in the table once the consumer drains.
    this.holes.remember({ from: event.seq, to: event.seq });
    return this.fallBehind();
  }
}
