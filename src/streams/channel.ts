/** A bounded async queue between a feed (pushing) and a subscription (pulling). */

import type { SendBuffer } from '../lib/send-buffer.ts';
import { Pullable } from './pullable.ts';

export interface ChannelOptions<T> {
  /** Most items held; push() refuses beyond it. */
  capacity: number;
  /** The connection's send buffer: queued items hold their size in it, and push() refuses what does not fit. */
  sendBuffer?: SendBuffer;
  sizeOf?: (item: T) => number;
  /** Called when a consumer has pulled the queue empty after a push was refused, once the send buffer has room. */
  onDrained?: () => void;
  /** Called once when the consumer stops (return) or the channel ends. */
  onClose?: () => void;
}

export class Channel<T> extends Pullable<T> {
  private readonly queue: T[] = [];
  /** The size each queued item holds in the send buffer. */
  private readonly sizes: number[] = [];
  /** What the item last handed to the consumer holds, until it asks for the next (it is being sent meanwhile). */
  private handed = 0;
  /** The size of the push last refused: the feed is told once that much fits again. */
  private refusedSize = 0;
  private wasFull = false;
  private ending = false;
  private cancelRoomWait: (() => void) | undefined;
  /** Where an item pushed while the consumer waits goes first (deliverTo). */
  private sink: ((item: T) => boolean) | undefined;

  /** The options push() reads, kept on the channel: one object less to reach per item and subscriber. */
  private readonly sendBuffer: SendBuffer | undefined;
  private readonly sizeOf: ((item: T) => number) | undefined;

  constructor(private readonly options: ChannelOptions<T>) {
    super(options.onClose);
    this.sendBuffer = options.sendBuffer;
    this.sizeOf = options.sizeOf;
  }

  /** @returns false when the channel (or the connection's send buffer) is full: the item was not taken */
  push(item: T): boolean {
    if (this.done) return true;
    const sendBuffer = this.sendBuffer;
    const size = sendBuffer ? (this.sizeOf?.(item) ?? 0) : 0;
    if ((!this.waiting && this.queue.length >= this.options.capacity) || (sendBuffer && !sendBuffer.admits(size))) {
      this.wasFull = true;
      this.refusedSize = size;
      this.drained();
      return false;
    }
    // Written by the consumer's sink at once, its waiting next() left pending: no promise per
    // item, and no room held for it here (the sink holds what it writes). One the sink ended
    // the stream on as it declined is dropped with the stream.
    if (this.waiting && this.sink && (this.sink(item) || this.done)) return true;
    if (size > 0) sendBuffer?.hold(size);
    if (this.waiting) {
      this.handed = size;
      this.hand(item);
      return true;
    }
    this.queue.push(item);
    this.sizes.push(size);
    return true;
  }

  /**
   * The feed will not push for now (its connection's send buffer is full): it is told, as after a
   * refused push, once the queue is empty and the send buffer has room.
   */
  stall() {
    if (this.done) return;
    this.wasFull = true;
    this.refusedSize = 1;
    this.drained();
  }

  /**
   * Items pushed while the consumer is waiting in next() go to `sink` first, synchronously, in
   * order; one it declines (false) is handed to the waiting next() as usual, and items pushed
   * while the consumer is busy with it are queued. The sink holds what it writes in the send
   * buffer itself: nothing is held here for an item it takes.
   */
  deliverTo(sink: (item: T) => boolean) {
    this.sink = sink;
  }

  /** Ends the stream: the consumer gets what is queued, then done (server shutdown). */
  end() {
    if (this.done) return;
    if (this.queue.length === 0) return this.close();
    this.ending = true;
  }

  /** A next() gets the oldest queued item (what it held in the send buffer is released at the next next()). */
  protected take(): IteratorResult<T> | undefined {
    this.releaseHanded();
    if (this.queue.length === 0) return undefined;
    const item = this.queue.shift() as T;
    this.handed = this.sizes.shift() ?? 0;
    if (this.ending && this.queue.length === 0) queueMicrotask(() => this.close());
    this.drained();
    return { value: item, done: false };
  }

  protected override waited() {
    this.drained();
  }

  /**
   * After a refused push, the feed is told (never from inside push or next) once the queue is
   * empty and the send buffer has room for what was refused.
   */
  private drained() {
    if (!this.wasFull || this.queue.length > 0 || this.cancelRoomWait || this.done) return;
    const notify = () => {
      this.cancelRoomWait = undefined;
      if (this.done || !this.wasFull || this.queue.length > 0) return;
      this.wasFull = false;
      this.options.onDrained?.();
    };
    if (this.options.sendBuffer) {
      this.cancelRoomWait = this.options.sendBuffer.whenRoom(this.refusedSize, notify);
      return;
    }
    let cancelled = false;
    this.cancelRoomWait = () => {
      cancelled = true;
    };
    queueMicrotask(() => cancelled || notify());
  }

  private releaseHanded() {
    if (this.handed === 0) return;
    const size = this.handed;
    this.handed = 0;
    this.options.sendBuffer?.release(size);
  }

  protected cleanUp() {
    this.queue.length = 0;
    this.releaseHanded();
    for (const size of this.sizes.splice(0)) this.options.sendBuffer?.release(size);
    this.cancelRoomWait?.();
    this.cancelRoomWait = undefined;
  }
}
