/**
 * One subscriber's view of a run's events: each seq once, in seq order, no gaps.
 *
 * Live events arrive from the stream poller and this server's fast path, in any order and
 * possibly twice. The feed keeps `next`, the next seq to hand out; an event below it is a
 * duplicate, an event above it waits in `pending` while the hole before it is filled from
 * the table (a consistent read). The API writes seq N only once N - 1 exists, so once an
 * event is seen, one read finds every event before it. A writer that bypasses the API may
 * write out of order, or late: a hole is then looked for in the table again and again, less
 * often as time passes, for `gapWaitMs`. Only then does the feed step over it, and says so:
 * the next event it hands out lists the seqs stepped over (`missingBefore`); a stepped-over
 * seq that shows up later is still handed out, marked `late`.
 *
 * A consumer that falls behind never makes the feed hold more than its connection's send
 * budget: past it, the feed stops queueing and, once the consumer has drained, reads on from
 * the table where it stopped (the table is the buffer).
 */
import type { DeliveredEvent as FeedEvent, RunEvent, SeqRange } from '../domain/run.ts';
import type { EventStore } from '../store/events.ts';
import { eventBytes } from '../table/codec.ts';
import { topics } from './changes.ts';
import { Channel } from './channel.ts';
import type { Hub } from './hub.ts';
import { SendBudget } from './send-budget.ts';
import { SkippedSeqs } from './skipped-seqs.ts';

export interface EventFeedOptions {
  hub: Hub;
  events: Pick<EventStore, 'page' | 'lastSeq'>;
  tenant: string;
  runId: string;
  /** Replay from the table after this seq, then live; absent: live from now. */
  afterSeq?: number;
  types?: readonly string[];
  /** The connection's send budget (shared with its other subscriptions); absent: one of this feed's own. */
  budget?: SendBudget;
  /** How long a hole may stay open before the table is asked (events racing each other usually close it). */
  holeGraceMs?: number;
  /** How long a hole the table cannot fill is waited for before it is stepped over. */
  gapWaitMs?: number;
  /** Events queued for a slow consumer (within the budget) before the feed stops queueing. */
  capacity?: number;
  /** Counts feeds reading from the table because their consumer fell behind (for /metrics). */
  stats?: { lagging: number };
  onError?: (err: unknown) => void;
}

/** Events read per table request (DynamoDB also stops a page at 1 MB). */
const PAGE = 500;
/** First and longest pause between looks at the table for a missing seq. */
const GAP_RECHECK_FIRST_MS = 50;
const GAP_RECHECK_MAX_MS = 2_000;
/** Live events held ahead of a hole; past this they are dropped and read from the table once it closes. */
const MAX_PENDING = 1_000;
/** A feed's own budget when its connection gives none. */
const DEFAULT_BUDGET_BYTES = 1024 * 1024;

type PageStep = 'more' | 'done' | 'stop';

export function eventFeed(options: EventFeedOptions): AsyncIterableIterator<FeedEvent> {
  const { hub, events, tenant, runId, types, holeGraceMs = 20, gapWaitMs = 30_000, capacity = 1000 } = options;
  const wanted = types?.length ? new Set(types) : undefined;
  const budget = options.budget ?? new SendBudget(DEFAULT_BUDGET_BYTES);
  const stats = options.stats ?? { lagging: 0 };

  /** The next seq to hand out; undefined until the starting point is known. */
  let next: number | undefined;
  /** Live events ahead of `next`. */
  const pending = new Map<number, RunEvent>();
  /** When the hole at `next` was first seen (undefined: no hole), and how many looks it has had. */
  let holeSince: number | undefined;
  let holeLooks = 0;
  /** Seqs stepped over, to hand out late if they appear; and those to announce with the next event. */
  const skipped = new SkippedSeqs();
  let unannounced: SeqRange[] = [];
  /** Look for stepped-over seqs in the table on the next fill (after a lag or a resync). */
  let recheckDue = false;
  /** The consumer fell behind: stop queueing, refill from the table once it catches up. */
  let behind = false;
  const lag = (on: boolean) => {
    if (on !== behind) stats.lagging += on ? 1 : -1;
    behind = on;
  };
  let filling: Promise<void> | undefined;
  let fillAgain = false;
  /** The last fill stopped at a hole it is still waiting for. */
  let holeOpen = false;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const out = new Channel<FeedEvent>({
    capacity,
    budget,
    sizeOf: eventBytes,
    onDrained: () => {
      lag(false);
      recheckDue = skipped.size > 0;
      fill();
    },
    onClose: () => {
      closed = true;
      lag(false);
      clearTimeout(timer);
      unsubscribe();
    },
  });

  /** Hands out the event at `next`. */
  const deliver = (event: RunEvent) => {
    next = event.seq + 1;
    holeSince = undefined;
    holeLooks = 0;
    if (wanted && !wanted.has(event.type)) return;
    const handed: FeedEvent = unannounced.length > 0 ? { ...event, missingBefore: unannounced } : event;
    if (!out.push(handed)) {
      // Full: everything from here on is in the table; fetch it when the consumer drains.
      lag(true);
      next = event.seq;
      pending.clear();
      return;
    }
    unannounced = [];
  };

  /** Looks at the table again after `ms` (one timer at a time). */
  const later = (ms: number) => {
    if (timer || closed) return;
    timer = setTimeout(() => {
      timer = undefined;
      fill();
    }, ms);
  };

  const flush = () => {
    if (next === undefined || closed) return;
    for (const seq of pending.keys()) if (seq < next) pending.delete(seq);
    for (let event = pending.get(next); event && !behind; event = pending.get(next)) {
      pending.delete(event.seq);
      deliver(event);
    }
    if (pending.size > 0 && !behind && !filling) later(holeGraceMs);
  };

  /** A hole at `next` with `beyond` the first seq known after it: wait for it, or step over once waited long enough. */
  const hole = (beyond: number) => {
    const now = Date.now();
    holeSince ??= now;
    if (now - holeSince < gapWaitMs || next === undefined) return false;
    const range = { from: next, to: beyond - 1 };
    skipped.add(range);
    unannounced.push(range);
    next = beyond;
    holeSince = undefined;
    holeLooks = 0;
    return true;
  };

  /** A seq the feed stepped over, found at last: handed out now, marked late. */
  const lateArrival = (event: RunEvent) => {
    if (!skipped.take(event.seq)) return;
    if (wanted && !wanted.has(event.type)) return;
    if (out.push({ ...event, late: true })) return;
    // Full: look for it again in the table once the consumer drains.
    skipped.add({ from: event.seq, to: event.seq });
    lag(true);
    recheckDue = true;
    pending.clear();
  };

  /** Reads the table from `next` on, and hands out what it finds; one fill at a time. */
  function fill() {
    if (closed) return;
    if (filling) {
      fillAgain = true;
      return;
    }
    filling = (async () => {
      for (let failures = 0; ; failures++) {
        try {
          await fillOnce();
          return;
        } catch (err) {
          // The table is unreachable for now: the subscriber waits, it is not dropped.
          options.onError?.(err);
          await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** failures)));
          if (closed) return;
        }
      }
    })().finally(() => {
      filling = undefined;
      if (closed || behind) return;
      if (fillAgain) fill();
      else flush();
    });
  }

  async function fillOnce() {
    do {
      fillAgain = false;
      holeOpen = false;
      if (recheckDue) {
        recheckDue = false;
        await recheckSkipped();
      }
      for (let step: PageStep = 'more'; step === 'more'; ) step = await readPage();
      if (closed || behind) return;
      const waiting = holeOpen;
      // Seen live but not (any more) in the table, behind a hole: the same wait, then step over.
      const known = Math.min(...pending.keys());
      if (waiting || (next !== undefined && pending.size > 0 && known > next && !hole(known)))
        later(Math.min(GAP_RECHECK_MAX_MS, GAP_RECHECK_FIRST_MS * 2 ** holeLooks++));
      flush();
    } while (fillAgain && !closed);
  }

  /**
   * Reads one page from `next` on and hands out what it can. Its own frame: the page is
   * dropped when it returns, not kept while the next read waits for its turn.
   */
  async function readPage(): Promise<PageStep> {
    if (closed || behind || next === undefined) return 'stop';
    const after = next - 1;
    // Read only while the connection has room: nothing read now could be queued otherwise.
    const page = await budget.read(async () =>
      budget.full
        ? undefined
        : events.page({ tenant, runId, after, limit: budget.itemsWithRoom(PAGE), consistent: true, singleRequest: true }),
    );
    if (!page) {
      lag(true);
      pending.clear();
      out.stall();
      return 'stop';
    }
    for (const event of page.events) {
      if (behind || closed) return 'stop';
      if (event.seq < next) continue;
      if (event.seq > next && !hole(event.seq)) {
        holeOpen = true;
        return 'stop';
      }
      deliver(event);
    }
    return page.more ? 'more' : 'done';
  }

  /** Stepped-over seqs written since, which the live feed may not have brought (it was behind, or the stream lost them). */
  async function recheckSkipped() {
    for (const range of skipped.ranges()) {
      if (closed || behind) return;
      const page = await budget.read(() =>
        events.page({ tenant, runId, after: range.from - 1, before: range.to + 1, limit: PAGE, consistent: true, singleRequest: true }),
      );
      for (const event of page.events) lateArrival(event);
    }
  }

  const unsubscribe = hub.subscribe(topics.events(tenant, runId), {
    change(change) {
      if (change.kind !== 'event' || closed || behind) return;
      const { event } = change;
      if (next !== undefined && event.seq < next) return lateArrival(event);
      pending.set(event.seq, event);
      if (pending.size > MAX_PENDING) {
        // Far behind a hole: the table has all of these; drop them and read it instead.
        pending.clear();
        fill();
        return;
      }
      flush();
    },
    resync() {
      recheckDue = skipped.size > 0;
      fill();
    },
  });

  // Start: from afterSeq (history, then live) or from the run's current end (live only).
  void (async () => {
    try {
      next = options.afterSeq !== undefined ? options.afterSeq + 1 : (await events.lastSeq(tenant, runId)) + 1;
      if (options.afterSeq !== undefined) fill();
      else flush();
    } catch (err) {
      options.onError?.(err);
      out.fail(err);
    }
  })();

  return out;
}
