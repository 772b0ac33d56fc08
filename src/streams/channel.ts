/** A bounded async queue between a feed (pushing) and a subscription (pulling). */
import type { SendBudget } from './send-budget.ts';

export interface ChannelOptions<T> {
  /** Most items held; push() refuses beyond it. */
  capacity: number;
  /** Keep only the newest item (state feeds: an older state is worthless once a newer one exists). */
  latestOnly?: boolean;
  /** The connection's budget: queued items hold their size in it, and push() refuses what does not fit. */
  budget?: SendBudget;
  sizeOf?: (item: T) => number;
  /** Called when a consumer has pulled the queue empty after a push was refused, once the budget has room. */
  onDrained?: () => void;
  /** Called once when the consumer stops (return) or the channel ends. */
  onClose?: () => void;
}

export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly queue: T[] = [];
  /** The size each queued item holds in the budget. */
  private readonly sizes: number[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiter: ((err: unknown) => void) | undefined;
  private done = false;
  private failure: unknown;
  private wasFull = false;
  private ending = false;
  private cancelRoomWait: (() => void) | undefined;

  constructor(private readonly options: ChannelOptions<T>) {}

  /** @returns false when the channel (or the connection's budget) is full: the item was not taken */
  push(item: T): boolean {
    if (this.done) return true;
    if (this.waiter) {
      const resolve = this.waiter;
      this.waiter = this.failWaiter = undefined;
      resolve({ value: item, done: false });
      return true;
    }
    if (this.options.latestOnly) {
      this.queue.length = 0;
      this.queue.push(item);
      return true;
    }
    const size = this.options.budget ? (this.options.sizeOf?.(item) ?? 0) : 0;
    if (this.queue.length >= this.options.capacity || (this.options.budget && !this.options.budget.tryHold(size))) {
      this.wasFull = true;
      return false;
    }
    this.queue.push(item);
    this.sizes.push(size);
    return true;
  }

  /**
   * The feed will not push for now (its connection's budget is full): it is told, as after a
   * refused push, once the queue is empty and the budget has room.
   */
  stall() {
    if (this.done) return;
    this.wasFull = true;
    if (this.queue.length === 0) this.drained();
  }

  /** Ends the stream: the consumer gets what is queued, then done (server shutdown). */
  end() {
    if (this.done) return;
    if (this.queue.length === 0) return this.close();
    this.ending = true;
  }

  /** Ends the stream with an error for the consumer. */
  fail(err: unknown) {
    if (this.done) return;
    this.failure = err;
    if (this.failWaiter) {
      const reject = this.failWaiter;
      this.waiter = this.failWaiter = undefined;
      reject(err);
      this.close();
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.queue.length > 0) {
      const item = this.queue.shift() as T;
      this.options.budget?.release(this.sizes.shift() ?? 0);
      if (this.ending && this.queue.length === 0) queueMicrotask(() => this.close());
      if (this.queue.length === 0) this.drained();
      return Promise.resolve({ value: item, done: false });
    }
    if (this.failure !== undefined) {
      const err = this.failure;
      this.close();
      return Promise.reject(err);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    this.drained();
    const refilled = this.queue.shift();
    if (refilled !== undefined) {
      this.options.budget?.release(this.sizes.shift() ?? 0);
      return Promise.resolve({ value: refilled, done: false });
    }
    return new Promise((resolve, reject) => {
      this.waiter = resolve;
      this.failWaiter = reject;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** The queue is empty after a refused push: tell the feed, once the connection has room again. */
  private drained() {
    if (!this.wasFull || this.cancelRoomWait) return;
    const notify = () => {
      this.cancelRoomWait = undefined;
      if (this.done) return;
      this.wasFull = false;
      this.options.onDrained?.();
    };
    if (!this.options.budget?.full) return notify();
    this.cancelRoomWait = this.options.budget.whenRoom(notify);
  }

  private close() {
    if (this.done) return;
    this.done = true;
    this.queue.length = 0;
    for (const size of this.sizes.splice(0)) this.options.budget?.release(size);
    this.cancelRoomWait?.();
    this.cancelRoomWait = undefined;
    const waiter = this.waiter;
    this.waiter = this.failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
    this.options.onClose?.();
  }
}
