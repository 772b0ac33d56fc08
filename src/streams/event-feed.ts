/**
 * One subscriber's view of a run's events: each seq once, in seq order, no gaps.
 *
 * Live events arrive from the stream poller and this server's fast path, in any order and
 * possibly twice. The feed keeps `next`, the next seq to hand out; an event below it is a
 * duplicate, an event above it waits in `pending` while the hole before it is filled from
 * the table (a consistent read). The API writes seq N only once N - 1 exists, so once an
 * event is seen, one read finds every event before it. A writer that bypasses the API may
 * write out of order, or late: see holes.ts for how long a hole is waited for, and what the
 * subscriber is told when it is stepped over.
 *
 * A consumer that falls behind never makes the feed hold more than its connection's send
 * budget: past it, the feed stops queueing and, once the consumer has drained, reads on from
 * the table where it stopped (the table is the buffer).
 */
import type { DeliveredEvent as FeedEvent, RunEvent } from '../domain/run.ts';
import { delayFor, sleep } from '../lib/backoff.ts';
import type { EventStore } from '../store/index.ts';
import { eventBytes } from '../table/codec.ts';
import { topics } from './changes.ts';
import { Channel } from './channel.ts';
import { Holes } from './holes.ts';
import type { Hub } from './hub.ts';
import { SendBudget } from './send-budget.ts';

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
/** Live events held ahead of a hole; past this they are dropped and read from the table once it closes. */
const MAX_PENDING = 1_000;
/** A feed's own budget when its connection gives none. */
const DEFAULT_BUDGET_BYTES = 1024 * 1024;
/** Pauses while the table cannot be read: the subscriber waits, it is not dropped. */
const TABLE_UNREACHABLE = { firstMs: 100, maxMs: 5_000 };

type PageStep = 'more' | 'done' | 'stop';

class EventFeed {
  readonly out: Channel<FeedEvent>;
  private readonly wanted: Set<string> | undefined;
  private readonly budget: SendBudget;
  private readonly holes: Holes;
  /** The next seq to hand out; undefined until the starting point is known. */
  private next: number | undefined;
  /** Live events ahead of `next`. */
  private readonly pending = new Map<number, RunEvent>();
  /** The consumer fell behind: stop queueing, refill from the table once it catches up. */
  private behind = false;
  /** Look for stepped-over seqs in the table on the next fill (after a lag or a resync). */
  private recheckDue = false;
  private filling: Promise<void> | undefined;
  private fillAgain = false;
  /** The last fill stopped at a hole it is still waiting for. */
  private holeOpen = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: EventFeedOptions) {
    this.wanted = options.types?.length ? new Set(options.types) : undefined;
    this.budget = options.budget ?? new SendBudget(DEFAULT_BUDGET_BYTES);
    this.holes = new Holes(options.gapWaitMs ?? 30_000);
    this.out = new Channel<FeedEvent>({
      capacity: options.capacity ?? 1000,
      budget: this.budget,
      sizeOf: eventBytes,
      onDrained: () => {
        this.lag(false);
        this.recheckDue = this.holes.steppedOver.length > 0;
        this.fill();
      },
      onClose: () => {
        this.closed = true;
        this.lag(false);
        clearTimeout(this.timer);
        this.unsubscribe();
      },
    });
    this.unsubscribe = options.hub.subscribe(topics.events(options.tenant, options.runId), {
      change: (change) => {
        if (change.kind === 'event') this.live(change.event);
      },
      resync: () => {
        this.recheckDue = this.holes.steppedOver.length > 0;
        this.fill();
      },
      // What is new in the table (a fill already running reads it, or runs once more).
      refill: () => this.fill(),
    });
  }

  /** Starts from afterSeq (history, then live) or from the run's current end (live only). */
  async start() {
    const { events, tenant, runId, afterSeq } = this.options;
    try {
      this.next = afterSeq !== undefined ? afterSeq + 1 : (await events.lastSeq(tenant, runId)) + 1;
      if (afterSeq !== undefined) this.fill();
      else this.flush();
    } catch (err) {
      this.options.onError?.(err);
      this.out.fail(err);
    }
  }

  private lag(on: boolean) {
    const stats = this.options.stats;
    if (stats && on !== this.behind) stats.lagging += on ? 1 : -1;
    this.behind = on;
  }

  /** The consumer cannot take more now: everything from `next` on is in the table; read it when it drains. */
  private fallBehind() {
    this.lag(true);
    this.pending.clear();
  }

  /** A live event from the hub. */
  private live(event: RunEvent) {
    if (this.closed || this.behind) return;
    if (this.next !== undefined && event.seq < this.next) return this.lateArrival(event);
    this.pending.set(event.seq, event);
    if (this.pending.size > MAX_PENDING) {
      // Far behind a hole: the table has all of these; drop them and read it instead.
      this.pending.clear();
      this.fill();
      return;
    }
    this.flush();
  }

  /** Hands out the event at `next`. */
  private deliver(event: RunEvent) {
    this.next = event.seq + 1;
    this.holes.filled();
    if (this.wanted && !this.wanted.has(event.type)) return;
    if (!this.out.push(this.holes.announce(event))) {
      this.fallBehind();
      this.next = event.seq;
      return;
    }
    this.holes.announced();
  }

  /** A seq the feed stepped over, found at last: handed out now, marked late. */
  private lateArrival(event: RunEvent) {
    if (!this.holes.takeLate(event.seq)) return;
    if (this.wanted && !this.wanted.has(event.type)) return;
    if (this.out.push({ ...event, late: true })) return;
    // Full: look for it again in the table once the consumer drains.
    this.holes.remember({ from: event.seq, to: event.seq });
    this.recheckDue = true;
    this.fallBehind();
  }

  /** Hands out the pending events that follow `next` without a hole. */
  private flush() {
    if (this.next === undefined || this.closed) return;
    for (const seq of this.pending.keys()) if (seq < this.next) this.pending.delete(seq);
    for (let event = this.pending.get(this.next); event && !this.behind; event = this.pending.get(this.next)) {
      this.pending.delete(event.seq);
      this.deliver(event);
    }
    if (this.pending.size > 0 && !this.behind && !this.filling) this.later(this.options.holeGraceMs ?? 20);
  }

  /** Looks at the table again after `ms` (one timer at a time). */
  private later(ms: number) {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fill();
    }, ms);
  }

  /** Reads the table from `next` on, and hands out what it finds; one fill at a time. */
  private fill() {
    if (this.closed) return;
    if (this.filling) {
      this.fillAgain = true;
      return;
    }
    this.filling = (async () => {
      for (let failures = 0; !this.closed; failures++) {
        try {
          return await this.fillOnce();
        } catch (err) {
          this.options.onError?.(err);
          await sleep(delayFor(TABLE_UNREACHABLE, failures));
        }
      }
    })().finally(() => {
      this.filling = undefined;
      if (this.closed || this.behind) return;
      if (this.fillAgain) this.fill();
      else this.flush();
    });
  }

  private async fillOnce() {
    do {
      this.fillAgain = false;
      this.holeOpen = false;
      if (this.recheckDue) {
        this.recheckDue = false;
        await this.recheckSteppedOver();
      }
      for (let step: PageStep = 'more'; step === 'more'; ) step = await this.readPage();
      if (this.closed || this.behind) return;
      // Seen live but not (any more) in the table, behind a hole: the same wait, then step over.
      const known = Math.min(...this.pending.keys());
      const next = this.next;
      if (this.holeOpen || (next !== undefined && this.pending.size > 0 && known > next && !this.holes.stepOver(next, known))) {
        this.later(this.holes.nextLook());
      }
      this.flush();
    } while (this.fillAgain && !this.closed);
  }

  /**
   * Reads one page from `next` on and hands out what it can. Its own frame: the page is
   * dropped when it returns, not kept while the next read waits for its turn.
   */
  private async readPage(): Promise<PageStep> {
    if (this.closed || this.behind || this.next === undefined) return 'stop';
    const { events, tenant, runId } = this.options;
    const after = this.next - 1;
    const budget = this.budget;
    // Read only while the connection has room: nothing read now could be queued otherwise.
    const page = await budget.read(async () =>
      budget.full
        ? undefined
        : events.page({ tenant, runId, after, limit: budget.itemsWithRoom(PAGE), consistent: true, singleRequest: true }),
    );
    if (!page) {
      this.fallBehind();
      this.out.stall();
      return 'stop';
    }
    for (const event of page.events) {
      if (this.behind || this.closed) return 'stop';
      if (event.seq < this.next) continue;
      if (event.seq > this.next && !this.holes.stepOver(this.next, event.seq)) {
        this.holeOpen = true;
        return 'stop';
      }
      this.deliver(event);
    }
    return page.more ? 'more' : 'done';
  }

  /** Stepped-over seqs written since, which the live feed may not have brought (it was behind, or the stream lost them). */
  private async recheckSteppedOver() {
    const { events, tenant, runId } = this.options;
    for (const range of this.holes.steppedOver) {
      if (this.closed || this.behind) return;
      const page = await this.budget.read(() =>
        events.page({ tenant, runId, after: range.from - 1, before: range.to + 1, limit: PAGE, consistent: true, singleRequest: true }),
      );
      for (const event of page.events) this.lateArrival(event);
    }
  }
}

export function eventFeed(options: EventFeedOptions): AsyncIterableIterator<FeedEvent> {
  const feed = new EventFeed(options);
  void feed.start();
  return feed.out;
}
