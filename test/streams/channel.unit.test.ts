/**
 * A channel's sink (Channel.deliverTo): what the live stage of a socket stands on. Items pushed
 * while the consumer waits go to the sink at once, in order; what it declines, and whatever is
 * pushed while the consumer is busy with that, reaches next() in order; the send buffer holds
 * nothing for what the sink took.
 */
import { describe, expect, test } from 'vitest';
import { SendBuffer } from '../../src/lib/send-buffer.ts';
import { Channel } from '../../src/streams/channel.ts';
import { lazily } from '../../src/streams/lazy.ts';

const sized = (sendBuffer: SendBuffer) => new Channel<number>({ capacity: 10, sendBuffer, sizeOf: () => 100 });

describe('a channel with a sink', () => {
  test('a sink that ends the stream as it declines leaves nothing held in the send buffer', async () => {
    const sendBuffer = new SendBuffer(1000);
    const channel = sized(sendBuffer);
    channel.deliverTo(() => {
      void channel.return();
      return false;
    });
    const waiting = channel.next();
    expect(channel.push(1)).toBe(true);
    expect(sendBuffer.bytes).toBe(0);
    expect(await waiting).toEqual({ done: true, value: undefined });
  });

  test('takes what is pushed while the consumer waits, synchronously, its next() left pending', async () => {
    const sendBuffer = new SendBuffer(1000);
    const channel = sized(sendBuffer);
    const sunk: number[] = [];
    channel.deliverTo((item) => sunk.push(item) > 0);
    let settled = false;
    void channel.next().then(() => {
      settled = true;
    });
    for (let i = 1; i <= 20; i++) expect(channel.push(i)).toBe(true);
    expect(sunk).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(sendBuffer.bytes).toBe(0);
  });

  test('hands what it declines to next(), and queues what comes while the consumer is busy, in order', async () => {
    const channel = sized(new SendBuffer(10_000));
    const sunk: number[] = [];
    channel.deliverTo((item) => item !== 3 && sunk.push(item) > 0);
    const first = channel.next();
    channel.push(1);
    channel.push(2);
    channel.push(3);
    // The consumer is busy with 3: these are queued for it, not sunk past it.
    channel.push(4);
    channel.push(5);
    expect(await first).toEqual({ value: 3, done: false });
    expect(await channel.next()).toEqual({ value: 4, done: false });
    expect(await channel.next()).toEqual({ value: 5, done: false });
    const waiting = channel.next();
    channel.push(6);
    expect(sunk).toEqual([1, 2, 6]);
    void channel.return();
    expect(await waiting).toEqual({ value: undefined, done: true });
  });

  test('refuses as before when the send buffer is full, and takes nothing once closed', () => {
    const sendBuffer = new SendBuffer(150);
    const channel = sized(sendBuffer);
    const sunk: number[] = [];
    channel.deliverTo((item) => {
      sunk.push(item);
      // As a socket's frame does: held until the client takes it.
      sendBuffer.hold(100);
      return true;
    });
    void channel.next();
    expect(channel.push(1)).toBe(true);
    expect(channel.push(2)).toBe(false);
    expect(sunk).toEqual([1]);
    void channel.return();
    expect(channel.push(3)).toBe(true);
    expect(sunk).toEqual([1]);
  });

  test('is passed on by a lazy source to the channel it creates', async () => {
    const sunk: number[] = [];
    let created: Channel<number> | undefined;
    const lazy = lazily(() => {
      created = new Channel<number>({ capacity: 10 });
      return created;
    });
    lazy.deliverTo?.((item) => sunk.push(item) > 0);
    void lazy.next();
    created?.push(7);
    expect(sunk).toEqual([7]);
  });
});
