/**
 * The newest state of something, for one subscriber: an older state is worthless once a
 * newer one exists, so at most one waits here. While the connection's send buffer is full
 * nothing is handed over (the subscriber gets the newest state once there is room), so a
 * client that stops reading holds one state here however often the state changes.
 */

import type { SendBuffer } from '../lib/send-buffer.ts';
import { NewestStates } from './newest-states.ts';

export interface LatestOptions {
  sendBuffer?: SendBuffer;
  /** Called once when the consumer stops (return) or the stream ends. */
  onClose?: () => void;
}

export class Latest<T> extends NewestStates<T> {
  private newest: { value: T } | undefined;

  constructor(options: LatestOptions = {}) {
    super(options.sendBuffer, options.onClose);
  }

  push(value: T) {
    if (this.done) return;
    this.newest = { value };
    this.handOver();
  }

  protected get pending() {
    return this.newest !== undefined;
  }

  protected takePending() {
    const { value } = this.newest as { value: T };
    this.newest = undefined;
    return value;
  }

  protected cleanUp() {
    this.newest = undefined;
  }
}
