/**
 * A run feed's events handed out in seq order, without I/O: the next seq, live events held
 * ahead of a hole until it closes, holes stepped over (holes.ts) and the late seqs found after,
 * and the event types the subscriber asked for. The state machine (event-feed-states.ts) says
 * when; this says what goes out.
 */
import type { DeliveredEvent, RunEvent, SeqRange } from '../domain/run.ts';
import { Holes } from './holes.ts';

/** Live events held ahead of a hole; past this they are dropped and read from the table once it closes. */
export const MAX_PENDING = 1_000;

const NO_RANGES: readonly SeqRange[] = [];

/** Where handed-out events go: true if taken, false if the consumer cannot take it now. */
export interface Outlet {
  push(event: DeliveredEvent): boolean;
}

export class EventOrder {
  /** The next seq to hand out (once started). */
  next = 0;
  readonly holes: Holes;
  private readonly wanted: Set<string> | undefined;
  /** Live events ahead of `next`. */
  private readonly pending = new Map<number, RunEvent>();
  /** Look for stepped-over seqs in the table at the next read (after a lag or a resync). */
  private recheckDue = false;
  private rechecking: readonly SeqRange[] = NO_RANGES;
  private recheckAt = 0;

  constructor(
    private readonly out: Outlet,
    types: readonly string[] | undefined,
    gapWaitMs: number,
    now?: () => number,
  ) {
    this.wanted = types?.length ? new Set(types) : undefined;
    this.holes = new Holes(gapWaitMs, now);
  }

  /** Live events held ahead of `next`. */
  get held() {
    return this.pending.size;
  }

  /**
   * Holds a live event ahead of `next` until what comes before it is handed out; past
   * MAX_PENDING every held event is dropped (false): the table has them.
   */
  hold(event: RunEvent): boolean {
    this.pending.set(event.seq, event);
    if (this.pending.size <= MAX_PENDING) return true;
    this.pending.clear();
    return false;
  }

  /** Forgets the events held (the table has them). */
  drop() {
    this.pending.clear();
  }

  /** The seqs held, in order (for tests and logs). */
  heldSeqs() {
    return [...this.pending.keys()].sort((a, b) => a - b);
  }

  /** Whether a table page's `seq` lies past a hole still waited for (one waited out is stepped over). */
  holeBefore(seq: number) {
    return seq > this.next && !this.holes.stepOver(this.next, seq);
  }

  /** Hands out the held events that follow `next` without a hole; false if the consumer refused one. */
  flush(): boolean {
    if (this.pending.size === 0) return true;
    for (const seq of this.pending.keys()) if (seq < this.next) this.pending.delete(seq);
    for (let event = this.pending.get(this.next); event; event = this.pending.get(this.next)) {
      this.pending.delete(event.seq);
      if (!this.deliver(event)) return false;
    }
    return true;
  }

  /** Hands out the event at `next`; false (and `next` stays) if the consumer refused it. */
  deliver(event: RunEvent): boolean {
    this.next = event.seq + 1;
    this.holes.filled();
    if (this.wanted && !this.wanted.has(event.type)) return true;
    if (!this.out.push(this.holes.announce(event))) {
      this.next = event.seq;
      return false;
    }
    this.holes.announced();
    return true;
  }

  /**
   * A seq below `next`: a duplicate (dropped), or a stepped-over seq found at last (handed out
   * now, marked late). False if the consumer refused it: it is stepped over again, so looked for
   * in the table once the consumer drains.
   */
  late(event: RunEvent): boolean {
    if (!this.holes.takeLate(event.seq)) return true;
    if (this.wanted && !this.wanted.has(event.type)) return true;
    if (this.out.push({ ...event, late: true })) return true;
    this.holes.remember({ from: event.seq, to: event.seq });
    return false;
  }

  /** Whether live events wait behind a hole the table did not fill (and it is still waited for). */
  livePastHole() {
    if (this.pending.size === 0) return false;
    let known = Number.POSITIVE_INFINITY;
    for (const seq of this.pending.keys()) if (seq < known) known = seq;
    if (known <= this.next) return false;
    if (!this.holes.stepOver(this.next, known)) return true;
    // Waited for long enough: on to the first seq seen live, which is handed out saying what is missing.
    this.next = known;
    return false;
  }

  /** Stepped-over seqs are looked for in the table at the next read (after a lag or a resync), if there are any. */
  recheckLater() {
    this.recheckDue = this.holes.hasSteppedOver;
  }

  /** The first range of stepped-over seqs to look for, if due (once per recheckLater). */
  firstRecheck(): SeqRange | undefined {
    if (!this.recheckDue) return undefined;
    this.recheckDue = false;
    const ranges = this.holes.steppedOver;
    if (ranges.length === 0) return undefined;
    this.rechecking = ranges;
    this.recheckAt = 0;
    return ranges[0];
  }

  /** The next range to look for, or undefined once all were. */
  nextRecheck(): SeqRange | undefined {
    this.recheckAt++;
    if (this.recheckAt < this.rechecking.length) return this.rechecking[this.recheckAt];
    this.rechecking = NO_RANGES;
    return undefined;
  }
}
