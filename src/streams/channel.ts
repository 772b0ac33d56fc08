/** A bounded async queue between a feed (pushing) and a subscription (pulling). */

export interface ChannelOptions {
  /** Most items held; push() refuses beyond it. */
  capacity: number;
  /** Keep only the newest item (state feeds: an older state is worthless once a newer one exists). */
  latestOnly?: boolean;
  /** Called when a consumer has pulled the queue empty after it had been full. */
  onDrained?: () => void;
  /** Called once when the consumer stops (return) or the channel ends. */
  onClose?: () => void;
}

export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly queue: T[] = [];
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiter: ((err: unknown) => void) | undefined;
  private done = false;
  private failure: unknown;
  private wasFull = false;
  private ending = false;

  constructor(private readonly options: ChannelOptions) {}

  /** @returns false when the channel is full (the item was not taken) */
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
    } else if (this.queue.length >= this.options.capacity) {
      this.wasFull = true;
      return false;
    }
    this.queue.push(item);
    return true;
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
    const item = this.queue.shift();
    if (item !== undefined) {
      if (this.ending && this.queue.length === 0) queueMicrotask(() => this.close());
      if (this.wasFull && this.queue.length === 0) {
        this.wasFull = false;
        this.options.onDrained?.();
      }
      return Promise.resolve({ value: item, done: false });
    }
    if (this.failure !== undefined) {
      const err = this.failure;
      this.close();
      return Promise.reject(err);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    if (this.wasFull) {
      this.wasFull = false;
      this.options.onDrained?.();
      const refilled = this.queue.shift();
      if (refilled !== undefined) return Promise.resolve({ value: refilled, done: false });
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

  private close() {
    if (this.done) return;
    this.done = true;
    this.queue.length = 0;
    const waiter = this.waiter;
    this.waiter = this.failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
    this.options.onClose?.();
  }
}
