/**
 * The newest state of something, for one subscriber: an older state is worthless once a
 * newer one exists, so at most one waits here. While the connection's send budget is full
 * nothing is handed over (the subscriber gets the newest state once there is room), so a
 * client that stops reading holds one state here however often the state changes.
 */
import type { SendBudget } from './send-budget.ts';

export interface LatestOptions {
  budget?: SendBudget;
  /** Called once when the consumer stops (return) or the stream ends. */
  onClose?: () => void;
}

export class Latest<T> implements AsyncIterableIterator<T> {
  private newest: { value: T } | undefined;
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiter: ((err: unknown) => void) | undefined;
  private cancelRoomWait: (() => void) | undefined;
  private failure: unknown;
  private done = false;
  private ending = false;

  constructor(private readonly options: LatestOptions = {}) {}

  push(value: T) {
    if (this.done) return;
    this.newest = { value };
    this.handOver();
  }

  /** Ends the stream once the newest state is taken (server shutdown). */
  end() {
    if (!this.newest) return this.close();
    this.ending = true;
  }

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
    if (this.failure !== undefined) {
      const err = this.failure;
      this.close();
      return Promise.reject(err);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    const promise = new Promise<IteratorResult<T>>((resolve, reject) => {
      this.waiter = resolve;
      this.failWaiter = reject;
    });
    this.handOver();
    return promise;
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private handOver() {
    if (!this.waiter || !this.newest || this.cancelRoomWait) return;
    if (this.options.budget?.full) {
      this.cancelRoomWait = this.options.budget.whenRoom(1, () => {
        this.cancelRoomWait = undefined;
        this.handOver();
      });
      return;
    }
    const { value } = this.newest;
    const resolve = this.waiter;
    this.newest = this.waiter = this.failWaiter = undefined;
    resolve({ value, done: false });
    if (this.ending) queueMicrotask(() => this.close());
  }

  private close() {
    if (this.done) return;
    this.done = true;
    this.newest = undefined;
    this.cancelRoomWait?.();
    this.cancelRoomWait = undefined;
    const waiter = this.waiter;
    this.waiter = this.failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
    this.options.onClose?.();
  }
}
