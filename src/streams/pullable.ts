/**
 * What the feeds' queues share on the consumer's side: one pending next() at a time, ended or
 * failed once, `onClose` called once. Subclasses decide what a next() gets (`take`) and what
 * else closing releases (`cleanUp`).
 */
import type { SendBuffer } from '../lib/send-buffer.ts';

export abstract class Pullable<T> implements AsyncIterableIterator<T> {
  private waiter: ((result: IteratorResult<T>) => void) | undefined;
  private cancelHandOverWait: (() => void) | undefined;
  private failWaiter: ((err: unknown) => void) | undefined;
  private failure: unknown;
  /** Also told when it closes (set once, by whoever tracks the stream). */
  private closedHook: (() => void) | undefined;
  protected done = false;

  constructor(private readonly onClose?: () => void) {}

  /** Calls `then` once the stream has closed (at once if it has). */
  whenClosed(then: () => void) {
    if (this.done) then();
    else this.closedHook = then;
  }

  /** What a next() gets now, if anything (undefined: it waits). */
  protected abstract take(): IteratorResult<T> | undefined;
  /** Releases what the subclass holds when the stream closes. */
  protected abstract cleanUp(): void;

  /** Whether a consumer is waiting in next(). */
  protected get waiting() {
    return this.waiter !== undefined;
  }

  /**
   * Whether a hand-over must wait for room in `sendBuffer` (it is full, or a wait is already
   * set): `handOver` then runs again, once, when there is room.
   */
  protected roomAwaited(sendBuffer: SendBuffer | undefined, handOver: () => void) {
    if (this.cancelHandOverWait) return true;
    if (!sendBuffer?.full) return false;
    this.cancelHandOverWait = sendBuffer.whenRoom(1, () => {
      this.cancelHandOverWait = undefined;
      handOver();
    });
    return true;
  }

  /** Hands `value` to the waiting consumer. */
  protected hand(value: T) {
    const resolve = this.waiter;
    this.waiter = this.failWaiter = undefined;
    resolve?.({ value, done: false });
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
    const taken = this.take();
    if (taken) return Promise.resolve(taken);
    if (this.failure !== undefined) {
      const err = this.failure;
      this.close();
      return Promise.reject(err);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    const waited = new Promise<IteratorResult<T>>((resolve, reject) => {
      this.waiter = resolve;
      this.failWaiter = reject;
    });
    this.waited();
    return waited;
  }

  /** A consumer began to wait (a subclass may hand it something at once). */
  protected waited() {}

  return(): Promise<IteratorResult<T>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  protected close() {
    if (this.done) return;
    this.done = true;
    this.cancelHandOverWait?.();
    this.cancelHandOverWait = undefined;
    this.cleanUp();
    const waiter = this.waiter;
    this.waiter = this.failWaiter = undefined;
    waiter?.({ value: undefined, done: true });
    this.onClose?.();
    this.closedHook?.();
    this.closedHook = undefined;
  }
}
