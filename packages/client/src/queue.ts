/**
 * What a subscription holds between its socket and its consumer, bounded. A feed of events
 * ('backlog') stops taking items at its limit and ends with 'backlog', so its stream can read
 * on from the table once the consumer caught up; a feed of states ('latest') keeps only the
 * newest, which is all its consumer needs.
 */
import type { RunplaneError } from './errors.ts';

export type QueuePolicy = 'backlog' | 'latest';
/** How a subscription ended: the server completed it, or its consumer fell too far behind. */
export type Ending = 'complete' | 'backlog';

export class BoundedQueue<T> {
  private readonly items: T[] = [];
  private ending: Ending | undefined;
  private failure: RunplaneError | undefined;
  private waiting: (() => void) | undefined;

  constructor(
    private readonly limit: number,
    private readonly policy: QueuePolicy,
  ) {}

  /** Adds an item; false once the queue is full and has ended with 'backlog' (stop feeding it). */
  push(item: T): boolean {
    if (this.ending || this.failure) return false;
    if (this.policy === 'latest') this.items.length = 0;
    this.items.push(item);
    if (this.policy === 'backlog' && this.items.length >= this.limit) this.ending = 'backlog';
    this.wake();
    return this.ending === undefined;
  }

  /** No more items will come: the consumer gets those queued, then this ending. */
  end(ending: Ending = 'complete') {
    this.ending ??= ending;
    this.wake();
  }

  /** The subscription failed: the consumer gets those queued, then this error. */
  fail(error: RunplaneError) {
    if (!this.ending) this.failure ??= error;
    this.wake();
  }

  get size() {
    return this.items.length;
  }

  async next(): Promise<IteratorResult<T, Ending>> {
    for (;;) {
      if (this.items.length > 0) return { done: false, value: this.items.shift() as T };
      if (this.failure) throw this.failure;
      if (this.ending) return { done: true, value: this.ending };
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
      });
    }
  }

  private wake() {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.();
  }
}
