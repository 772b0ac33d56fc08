/**
 * One subscriber's view of a run's events: each seq once, in seq order, no gaps.
 *
 * Live events arrive from the stream poller and this server's fast path, in any order and
 * possibly twice. The feed keeps `next`, the next seq to hand out; an event below it is a
 * duplicate, an event above it waits in `pending` while the hole before it is filled from
 * the table (a consistent read). The API writes seq N only once N - 1 exists, so once an
 * event is seen, one read finds every event before it. A writer that bypasses the API may
 * write out of order: a hole is then waited for (up to `gapWaitMs`, re-reading the table)
 * before the feed steps over it, so a late seq is still handed out in its place.
 */
import type { RunEvent } from '../domain/run.ts';
import type { EventStore } from '../store/events.ts';
import { topics } from './changes.ts';
import { Channel } from './channel.ts';
import type { Hub } from './hub.ts';

export interface EventFeedOptions {
  hub: Hub;
  events: Pick<EventStore, 'page' | 'lastSeq'>;
  tenant: string;
  runId: string;
  /** Replay from the table after this seq, then live; absent: live from now. */
  afterSeq?: number;
  types?: readonly string[];
  /** How long a hole may stay open before the table is asked (events racing each other usually close it). */
  holeGraceMs?: number;
  /** How long a hole the table cannot fill is waited for before it is stepped over. */
  gapWaitMs?: number;
  /** Events queued for a slow consumer before the feed stops queueing and refills from the table later. */
  capacity?: number;
  onError?: (err: unknown) => void;
}

const PAGE = 500;
/** How often a hole the table cannot fill yet is looked at again. */
const GAP_RECHECK_MS = 50;

export function eventFeed(options: EventFeedOptions): AsyncIterableIterator<RunEvent> {
  const { hub, events, tenant, runId, types, holeGraceMs = 20, gapWaitMs = 1000, capacity = 1000 } = options;
  const wanted = types?.length ? new Set(types) : undefined;

  /** The next seq to hand out; undefined until the starting point is known. */
  let next: number | undefined;
  /** Live events ahead of `next`. */
  const pending = new Map<number, RunEvent>();
  /** When the hole at `next` was first seen (undefined: no hole). */
  let holeSince: number | undefined;
  /** The consumer fell behind: stop queueing, refill from the table once it catches up. */
  let lagging = false;
  let filling: Promise<void> | undefined;
  let fillAgain = false;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const out = new Channel<RunEvent>({
    capacity,
    onDrained: () => {
      lagging = false;
      fill();
    },
    onClose: () => {
      closed = true;
      clearTimeout(timer);
      unsubscribe();
    },
  });

  /** Hands out the event at `next`. */
  const deliver = (event: RunEvent) => {
    next = event.seq + 1;
    holeSince = undefined;
    if (wanted && !wanted.has(event.type)) return;
    if (!out.push(event)) {
      // Full: everything from here on is in the table; fetch it when the consumer drains.
      lagging = true;
      next = event.seq;
      pending.clear();
    }
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
    for (let event = pending.get(next); event && !lagging; event = pending.get(next)) {
      pending.delete(event.seq);
      deliver(event);
    }
    if (pending.size > 0 && !lagging && !filling) later(holeGraceMs);
  };

  /** A hole at `next` with `beyond` the first seq known after it: wait for it, or step over once waited long enough. */
  const hole = (beyond: number) => {
    const now = Date.now();
    holeSince ??= now;
    if (now - holeSince < gapWaitMs) return false;
    next = beyond;
    holeSince = undefined;
    return true;
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
      if (closed || lagging) return;
      if (fillAgain) fill();
      else flush();
    });
  }

  async function fillOnce() {
    do {
      fillAgain = false;
      let waiting = false;
      pages: for (;;) {
        if (closed || lagging || next === undefined) return;
        const page = await events.page({ tenant, runId, after: next - 1, limit: PAGE, consistent: true });
        for (const event of page.events) {
          if (lagging || closed) return;
          if (event.seq < next) continue;
          if (event.seq > next && !hole(event.seq)) {
            waiting = true;
            break pages;
          }
          deliver(event);
        }
        if (!page.more) break;
      }
      // Seen live but not (any more) in the table, behind a hole: the same wait, then step over.
      const known = Math.min(...pending.keys());
      if (!waiting && next !== undefined && pending.size > 0 && known > next && !hole(known)) waiting = true;
      if (waiting) later(GAP_RECHECK_MS);
      flush();
    } while (fillAgain && !closed);
  }

  const unsubscribe = hub.subscribe(topics.events(tenant, runId), {
    change(change) {
      if (change.kind !== 'event' || closed || lagging) return;
      const { event } = change;
      if (next !== undefined && event.seq < next) return;
      pending.set(event.seq, event);
      if (pending.size > capacity * 10) {
        // Far behind a hole: the table has all of these; drop them and read it instead.
        pending.clear();
        fill();
        return;
      }
      flush();
    },
    resync() {
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
