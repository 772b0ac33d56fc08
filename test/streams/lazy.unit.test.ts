/**
 * The lazy feed (streams/lazy.ts): its source is made on the first pull, never when nothing
 * pulls; a queue's own promises are handed out, and the source stops being tracked however it
 * ends (closed by the consumer, ended by itself), for a queue and for any other iterator.
 */
import { describe, expect, test } from 'vitest';
import { Channel } from '../../src/streams/channel.ts';
import { lazily } from '../../src/streams/lazy.ts';

function tracked() {
  const open = new Set<unknown>();
  let made = 0;
  return {
    open,
    made: () => made,
    track: (source: unknown) => {
      open.add(source);
      return () => open.delete(source);
    },
    channel: () => {
      made++;
      return new Channel<number>({ capacity: 10 });
    },
  };
}

describe('a lazy feed', () => {
  test('makes nothing until pulled, and nothing at all when returned first', async () => {
    const t = tracked();
    const lazy = lazily(t.channel, t.track);
    expect(t.made()).toBe(0);
    await lazy.return?.();
    expect(await lazy.next()).toEqual({ value: undefined, done: true });
    expect(t.made()).toBe(0);
    expect(t.open.size).toBe(0);
  });

  test('hands out its queue`s items; the queue untracked once it closes, by the consumer or by itself', async () => {
    const t = tracked();
    let queue: Channel<number> | undefined;
    const lazy = lazily(() => {
      queue = t.channel();
      return queue;
    }, t.track);
    const first = lazy.next();
    expect(t.open.size).toBe(1);
    queue?.push(1);
    expect(await first).toEqual({ value: 1, done: false });
    queue?.end();
    expect(await lazy.next()).toEqual({ value: undefined, done: true });
    expect(t.open.size).toBe(0);

    const other = lazily(t.channel, t.track);
    const pending = other.next();
    expect(t.open.size).toBe(1);
    await other.return?.();
    expect(await pending).toEqual({ value: undefined, done: true });
    expect(t.open.size).toBe(0);
  });

  test('an iterator that is not a queue is untracked when it ends', async () => {
    const t = tracked();
    const lazy = lazily(async function* () {
      yield 1;
    }, t.track);
    expect(await lazy.next()).toEqual({ value: 1, done: false });
    expect(t.open.size).toBe(1);
    expect(await lazy.next()).toEqual({ value: undefined, done: true });
    expect(t.open.size).toBe(0);
    expect(await lazy.next()).toEqual({ value: undefined, done: true });
  });
});
