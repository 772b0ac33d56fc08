/**
 * An async iterator that creates its source on the first pull. A subscription whose client
 * went away before anything pulled (an SSE request aborted while the subscription was being
 * set up) then never subscribes to anything, and so leaks nothing. A class: every idle
 * subscriber holds one, and methods are shared where closures would be its own.
 *
 * A source that says when it closes (a Pullable: every feed's queue) has its own promises
 * handed out, with no await of this iterator's own (each event costs each subscriber a promise
 * per layer it passes through); another is awaited to see its end.
 */

import { DONE } from '../lib/iteration.ts';

/** What a feed returns: any async iterator; one that can tell when it has closed is passed through. */
export type Source<T> = AsyncIterableIterator<T> & {
  whenClosed?(then: () => void): void;
  /** Takes items at once while the consumer waits, where the source can (a feed's channel: Channel.deliverTo). */
  deliverTo?(sink: (item: T) => boolean): void;
};

class Lazy<T> implements AsyncIterableIterator<T> {
  private source: Source<T> | undefined;
  private untrack: (() => void) | undefined;
  private finished = false;
  private sink: ((item: T) => boolean) | undefined;

  constructor(
    private readonly create: () => Source<T>,
    private readonly track?: (source: Source<T>) => () => void,
  ) {}

  private start() {
    if (!this.source) {
      const source = this.create();
      this.source = source;
      this.untrack = this.track?.(source);
      source.whenClosed?.(this.finish.bind(this));
      if (this.sink) source.deliverTo?.(this.sink);
    }
    return this.source;
  }

  private finish() {
    this.finished = true;
    this.untrack?.();
    this.untrack = undefined;
  }

  /** Passed on to the source (once it is created). */
  deliverTo(sink: (item: T) => boolean) {
    this.sink = sink;
    this.source?.deliverTo?.(sink);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.finished) return Promise.resolve(DONE);
    const source = this.start();
    if (source.whenClosed) return source.next();
    return source.next().then((result) => {
      if (result.done) this.finish();
      return result;
    });
  }

  async return(): Promise<IteratorResult<T>> {
    this.finish();
    await this.source?.return?.();
    return DONE;
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

export function lazily<T>(create: () => Source<T>, track?: (source: Source<T>) => () => void): Source<T> {
  return new Lazy(create, track);
}
