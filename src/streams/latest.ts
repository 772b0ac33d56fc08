/**
 * The newest state of something, for one subscriber: an older state is worthless once a
 * newer one exists, so at most one waits here. While the connection's send buffer is full
 * nothing is handed over (the subscriber gets the newest state once there is room), so a
 * client that stops reading holds one state here however often the state changes.
 */
import { Pullable } from './pullable.ts';
import type { SendBuffer } from './send-buffer.ts';

export interface LatestOptions {
  sendBuffer?: SendBuffer;
  /** Called once when the consumer stops (return) or the stream ends. */
  onClose?: () => void;
}

export class Latest<T> extends Pullable<T> {
  private newest: { value: T } | undefined;
  private cancelRoomWait: (() => void) | undefined;
  private ending = false;

  constructor(private readonly options: LatestOptions = {}) {
    super(options.onClose);
  }

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

  /** A next() waits for the newest state, handed over once the send buffer has room. */
  protected take() {
    return undefined;
  }

  protected override waited() {
    this.handOver();
  }

  private handOver() {
    if (!this.waiting || !this.newest || this.cancelRoomWait) return;
    if (this.options.sendBuffer?.full) {
      this.cancelRoomWait = this.options.sendBuffer.whenRoom(1, () => {
        this.cancelRoomWait = undefined;
        this.handOver();
      });
      return;
    }
    const { value } = this.newest;
    this.newest = undefined;
    this.hand(value);
    if (this.ending) queueMicrotask(() => this.close());
  }

  protected cleanUp() {
    this.newest = undefined;
    this.cancelRoomWait?.();
    this.cancelRoomWait = undefined;
  }
}
