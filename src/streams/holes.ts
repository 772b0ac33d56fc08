/**
 * A run feed's holes: a seq missing from the table while a later one is there. A hole is
 * looked for again and again, less often as time passes, for `gapWaitMs`; then stepped over
 * and announced with the next event handed out (`missingBefore`). A stepped-over seq found
 * later is handed out then, marked late.
 */
import type { DeliveredEvent, RunEvent, SeqRange } from '../domain/run.ts';
import { delayFor } from '../lib/backoff.ts';

/** First and longest pause between looks at the table for a missing seq. */
const LOOK_AGAIN = { firstMs: 50, maxMs: 2_000 };
/** Ranges remembered per feed; past this the oldest is forgotten (a seq written in it later is then not handed out). */
const MAX_SKIPPED_RANGES = 64;

export class Holes {
  /** When the hole at the feed's next seq was first seen (undefined: no hole), and how many looks it had. */
  private since: number | undefined;
  private looks = 0;
  private readonly skipped: SeqRange[] = [];
  private unannounced: SeqRange[] = [];

  constructor(
    private readonly gapWaitMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The seq the feed waited for came: there is no hole any more. */
  filled() {
    this.since = undefined;
    this.looks = 0;
  }

  /**
   * A hole from `next` up to `beyond` (the first seq known after it): false while it is
   * still waited for; true once waited long enough, and then stepped over (remembered, and
   * announced with the next event).
   */
  stepOver(next: number, beyond: number) {
    const now = this.now();
    this.since ??= now;
    if (now - this.since < this.gapWaitMs) return false;
    const range = { from: next, to: beyond - 1 };
    this.remember(range);
    this.unannounced.push(range);
    this.filled();
    return true;
  }

  /** How long to wait before looking at the table again (grows with each look). */
  nextLook() {
    return delayFor(LOOK_AGAIN, this.looks++);
  }

  /** The event as it is handed out: with the seqs stepped over since the previous one, if any. */
  announce(event: RunEvent): DeliveredEvent {
    return this.unannounced.length > 0 ? { ...event, missingBefore: this.unannounced } : event;
  }

  /** The announced ranges reached the subscriber. */
  announced() {
    // Once per event handed out: no new array while there is nothing to announce.
    if (this.unannounced.length > 0) this.unannounced = [];
  }

  /** Forgets `seq` if it was stepped over; true if it was (it is to be handed out late). */
  takeLate(seq: number) {
    // Every duplicate (each event comes by the fast path and again by the stream) asks: no closure when nothing was stepped over.
    if (this.skipped.length === 0) return false;
    const index = this.skipped.findIndex((range) => range.from <= seq && seq <= range.to);
    if (index < 0) return false;
    const range = this.skipped[index] as SeqRange;
    const rest = [
      ...(range.from < seq ? [{ from: range.from, to: seq - 1 }] : []),
      ...(seq < range.to ? [{ from: seq + 1, to: range.to }] : []),
    ];
    this.skipped.splice(index, 1, ...rest);
    return true;
  }

  /** A late seq the subscriber could not take now: to be looked for again. */
  remember(range: SeqRange) {
    this.skipped.push({ ...range });
    if (this.skipped.length > MAX_SKIPPED_RANGES) this.skipped.shift();
  }

  /** The stepped-over ranges still not found. */
  get steppedOver(): readonly SeqRange[] {
    return [...this.skipped];
  }

  get hasSteppedOver() {
    return this.skipped.length > 0;
  }
}
