/**
 * One subscriber's view of a run's events: each seq once, in seq order, no gaps.
 *
 * Live events arrive from the stream poller and this server's fast path, in any order and
 * possibly twice. The feed keeps `next`, the next seq to hand out; an event below it is a
 * duplicate, an event above it waits in `pending` while the hole before it is filled from
 * the table (a consistent read). Seqs written through the API are contiguous (seq N is
 * only written once N - 1 exists), so once an event is seen, one read finds every event
 * before it; only a writer that bypasses the API can leave a real gap, which the feed then
 * steps over.
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
  /** Events queued for a slow consumer before the feed stops queueing and refills from the table later. */
  capacity?: number;
  onError?: (err: unknown) => void;
}

const PAGE = 500;

export function eventFeed(options: EventFeedOptions): AsyncIterableIterator<RunEvent> {
  const { hub, events, tenant, runId, types, holeGraceMs = 20, capacity = 1000 } = options;
  const wanted = types?.length ? new Set(types) : undefined;

  /** The next seq to hand out; undefined until the starting point is known. */
  let next: number | undefined;
  /** Live events ahead of `next`, with the fill generation they arrived in. */
  const pending = new Map<number, { event: RunEvent; generation: number }>();
  /** Fills so far: an event seen before fill N started is covered by fill N's read. */
  let generation = 0;
  /** The consumer fell behind: stop queueing, refill from the table once it catches up. */
  let lagging = false;
  let filling: Promise<void> | undefined;
  let fillAgain = false;
  let holeTimer: NodeJS.Timeout | undefined;
  let closed = false;

  const out = new Channel<RunEvent>({
    capacity,
    onDrained: () => {
      lagging = false;
      fill();
    },
    onClose: () => {
      closed = true;
      clearTimeout(holeTimer);
      unsubscribe();
    },
  });

  /** Hands out the event at `next`. */
  const deliver = (event: RunEvent) => {
    next = event.seq + 1;
    if (wanted && !wanted.has(event.type)) return;
    if (!out.push(event)) {
      // Full: everything from here on is in the table; fetch it when the consumer drains.
      lagging = true;
      next = event.seq;
      pending.clear();
    }
  };

  const flush = () => {
    if (next === undefined || closed) return;
    for (const seq of pending.keys()) if (seq < next) pending.delete(seq);
    for (let entry = pending.get(next); entry && !lagging; entry = pending.get(next)) {
      pending.delete(entry.event.seq);
      deliver(entry.event);
    }
    if (pending.size > 0 && !lagging && !holeTimer && !filling) {
      holeTimer = setTimeout(() => {
        holeTimer = undefined;
        fill();
      }, holeGraceMs);
    }
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
      if (pending.size > 0) flush();
    });
  }

  async function fillOnce() {
    do {
      fillAgain = false;
      const startedAt = ++generation;
      for (;;) {
        if (closed || lagging || next === undefined) return;
        const page = await events.page({ tenant, runId, after: next - 1, limit: PAGE, consistent: true });
        for (const event of page.events) {
          if (lagging || closed) return;
          if (event.seq >= next) deliver(event);
        }
        if (!page.more) break;
      }
      // Events seen before this fill began, with seqs still missing before them, sit
      // behind a real gap in the table (a direct writer skipped seqs): step over it.
      const covered = [...pending.values()].filter((p) => p.generation < startedAt).map((p) => p.event.seq);
      if (covered.length > 0 && next !== undefined && Math.min(...covered) > next) next = Math.min(...covered);
      flush();
    } while (fillAgain && !closed);
  }

  const unsubscribe = hub.subscribe(topics.events(tenant, runId), {
    change(change) {
      if (change.kind !== 'event' || closed) return;
      const { event } = change;
      if (next !== undefined && event.seq < next) return;
      if (lagging) return;
      pending.set(event.seq, { event, generation });
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
