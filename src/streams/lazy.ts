/**
 * An async iterator that creates its source on the first pull. A subscription whose client
 * went away before anything pulled (an SSE request aborted while the subscription was being
 * set up) then never subscribes to anything, and so leaks nothing.
 */
export function lazily<T>(
  create: () => AsyncIterableIterator<T>,
  track?: (source: AsyncIterableIterator<T>) => () => void,
): AsyncIterableIterator<T> {
  let source: AsyncIterableIterator<T> | undefined;
  let untrack: (() => void) | undefined;
  let finished = false;
  const start = () => {
    if (!source) {
      source = create();
      untrack = track?.(source);
    }
    return source;
  };
  const finish = () => {
    finished = true;
    untrack?.();
  };
  return {
    async next() {
      if (finished) return { value: undefined, done: true };
      const result = await start().next();
      if (result.done) finish();
      return result;
    },
    async return() {
      finish();
      await source?.return?.();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
