/**
 * An async iterator that creates its source on the first pull. A subscription whose client
 * went away before anything pulled (an SSE request aborted while the subscription was being
 * set up) then never subscribes to anything, and so leaks nothing. A class: every idle
 * subscriber holds one, and methods are shared where closures would be its own.
 */
class Lazy<T> implements AsyncIterableIterator<T> {
  private source: AsyncIterableIterator<T> | undefined;
  private untrack: (() => void) | undefined;
  private finished = false;

  constructor(
    private readonly create: () => AsyncIterableIterator<T>,
    private readonly track?: (source: AsyncIterableIterator<T>) => () => void,
  ) {}

  private start() {
    if (!this.source) {
      this.source = this.create();
      this.untrack = this.track?.(this.source);
    }
    return this.source;
  }

  private finish() {
    this.finished = true;
    this.untrack?.();
  }

  async next(): Promise<IteratorResult<T>> {
    if (this.finished) return { value: undefined, done: true };
    const result = await this.start().next();
    if (result.done) this.finish();
    return result;
  }

  async return(): Promise<IteratorResult<T>> {
    this.finish();
    await this.source?.return?.();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

export function lazily<T>(
  create: () => AsyncIterableIterator<T>,
  track?: (source: AsyncIterableIterator<T>) => () => void,
): AsyncIterableIterator<T> {
  return new Lazy(create, track);
}
