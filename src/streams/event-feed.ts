/**
 * One subscriber's view of a run's events: each seq once, in seq order, no gaps.
 *
 * Live events arrive from the stream poller and this server's fast path, in any order and
 * possibly twice. The feed keeps `next`, the next seq to hand out; an event below it is a
 * duplicate, an event above it waits while the hole before it is filled from the table (a
 * consistent read). The API writes seq N only once N - 1 exists, so once an event is seen,
 * one read finds every event before it. A writer that bypasses the API may write out of
 * order, or late: see holes.ts for how long a hole is waited for, and what the subscriber is
 * told when it is stepped over.
 *
 * A consumer that falls behind never makes the feed hold more than its connection's send
 * buffer: past it, the feed stops queueing and, once the consumer has drained, reads on from
 * the table where it stopped (the table is the buffer).
 *
 * What to do when is decided in event-feed-states.ts (its states, without I/O); this file
 * only does it: reads the table, sets the timers, listens to the hub, queues for the consumer.
 */

import type { DeliveredEvent as FeedEvent } from '../domain/run.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import type { EventStore } from '../store/index.ts';
import { eventBytes } from '../table/codec.ts';
import { type Change, topics } from './changes.ts';
import { Channel } from './channel.ts';
import { Effect } from './event-feed-effects.ts';
import { EventFeedMachine } from './event-feed-states.ts';
import type { FeedTable } from './feed-table.ts';
import type { Hub, Listener } from './hub.ts';
import type { Source } from './lazy.ts';

export interface EventFeedOptions {
  hub: Hub;
  /** The table as this feed reads it (within its connection's and its tenant's reads). */
  table: Pick<FeedTable, 'events' | 'lastSeq'>;
  tenant: string;
  runId: string;
  /** Replay from the table after this seq, then live; absent: live from now. */
  afterSeq?: number;
  types?: readonly string[];
  /** The connection's send buffer (shared with its other subscriptions), the one `table` reads within. */
  sendBuffer: SendBuffer;
  /** How long a hole may stay open before the table is asked (events racing each other usually close it). */
  holeGraceMs?: number;
  /** How long a hole the table cannot fill is waited for before it is stepped over. */
  gapWaitMs?: number;
  /** Events queued for a slow consumer (within the send buffer) before the feed stops queueing. */
  capacity?: number;
  /** Counts feeds reading from the table because their consumer fell behind (for /metrics). */
  stats?: { lagging: number };
  onError?: (err: unknown) => void;
}

/** Events read per table request (DynamoDB also stops a page at 1 MB). */
const PAGE = 500;

type Page = Awaited<ReturnType<EventStore['page']>>;

/**
 * Its handlers are methods, not arrow functions kept per feed: an idle subscriber holds only what
 * it must (each function kept per feed is an object of its own, more so when named by the compiler).
 */
class EventFeed implements Listener {
  readonly out: Channel<FeedEvent>;
  private readonly machine: EventFeedMachine;
  private readonly sendBuffer: SendBuffer;
  private lookTimer: NodeJS.Timeout | undefined;
  private pauseTimer: NodeJS.Timeout | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: EventFeedOptions) {
    this.sendBuffer = options.sendBuffer;
    this.out = new Channel<FeedEvent>({
      capacity: options.capacity ?? 1000,
      sendBuffer: this.sendBuffer,
      sizeOf: eventBytes,
      onDrained: this.drained.bind(this),
      onClose: this.closed.bind(this),
    });
    this.machine = new EventFeedMachine({
      afterSeq: options.afterSeq,
      types: options.types,
      out: this.out,
      holeGraceMs: options.holeGraceMs ?? 20,
      gapWaitMs: options.gapWaitMs ?? 30_000,
    });
    this.unsubscribe = options.hub.subscribe(topics.events(options.tenant, options.runId), this);
  }

  change(change: Change) {
    if (change.kind === 'event') this.perform(this.machine.event(change.event));
  }

  resync() {
    this.perform(this.machine.resync());
  }

  private drained() {
    this.perform(this.machine.drained());
  }

  private closed() {
    this.perform(this.machine.close());
  }

  refill() {
    this.perform(this.machine.refill());
  }

  start() {
    this.perform(this.machine.start());
  }

  private perform(effects: number) {
    if (effects === Effect.NONE) return;
    const machine = this.machine;
    const stats = this.options.stats;
    if (stats && effects & Effect.BEHIND) stats.lagging++;
    if (stats && effects & Effect.CAUGHT_UP) stats.lagging--;
    if (effects & Effect.CANCEL_LOOK) this.cancelLook();
    if (effects & Effect.REPORT) this.options.onError?.(machine.error);
    if (effects & Effect.FAIL) this.out.fail(machine.error);
    if (effects & Effect.STALL) this.out.stall();
    if (effects & Effect.END) {
      this.cancelLook();
      clearTimeout(this.pauseTimer);
      this.unsubscribe();
    }
    if (effects & Effect.LOOK) {
      this.cancelLook();
      this.lookTimer = setTimeout(() => this.onLook(), machine.delayMs);
    }
    if (effects & Effect.PAUSE) this.pauseTimer = setTimeout(() => this.onRetry(), machine.delayMs);
    if (effects & Effect.READ) this.read();
    if (effects & Effect.RECHECK) this.recheck();
    if (effects & Effect.FIND_END) this.findEnd();
  }

  private cancelLook() {
    clearTimeout(this.lookTimer);
    this.lookTimer = undefined;
  }

  private onLook() {
    this.lookTimer = undefined;
    this.perform(this.machine.look());
  }

  private onRetry() {
    this.pauseTimer = undefined;
    this.perform(this.machine.retry());
  }

  /** Where the run ends: as the hub knows it while this server watches the run, or read (shared with others starting alike). */
  private findEnd() {
    const { table, tenant, runId, hub } = this.options;
    const topic = topics.events(tenant, runId);
    hub
      .endFor(topic, this, () => table.lastSeq(runId))
      .then(
        (lastSeq) => this.onFound(lastSeq),
        (err) => this.onFailed(err),
      );
  }

  private onFound(lastSeq: number) {
    let effects: number;
    try {
      effects = this.machine.found(lastSeq);
    } catch (err) {
      effects = this.machine.failed(err);
    }
    this.perform(effects);
  }

  /** Reads a page from `next` on, only while the connection has room: nothing read now could be queued otherwise. */
  private read() {
    const { table, runId } = this.options;
    const after = this.machine.next - 1;
    const sendBuffer = this.sendBuffer;
    table
      .events(() =>
        sendBuffer.full ? undefined : { runId, after, limit: sendBuffer.itemsWithRoom(PAGE), consistent: true, singleRequest: true },
      )
      .then(
        (page) => this.handle(page, false),
        (err) => this.onFailed(err),
      );
  }

  /** Stepped-over seqs written since, which the live feed may not have brought (it was behind, or the stream lost them). */
  private recheck() {
    const { table, runId } = this.options;
    const range = this.machine.range;
    if (!range) return;
    table
      .events(() => ({ runId, after: range.from - 1, before: range.to + 1, limit: PAGE, consistent: true, singleRequest: true }))
      .then(
        (page) => this.handle(page, true),
        (err) => this.onFailed(err),
      );
  }

  private handle(page: Page | undefined, recheck: boolean) {
    let effects: number;
    try {
      effects = !page ? this.machine.full() : recheck ? this.machine.rechecked(page.events) : this.machine.page(page.events, page.more);
    } catch (err) {
      // Handing out failed, not the read: reported, and (reading) read again as after a failed read.
      effects = this.machine.failed(err);
    }
    this.perform(effects);
  }

  private onFailed(err: unknown) {
    this.perform(this.machine.failed(err));
  }
}

export function eventFeed(options: EventFeedOptions): Source<FeedEvent> {
  const feed = new EventFeed(options);
  feed.start();
  return feed.out;
}
