/**
 * What Latest and KeyedLatest share: states wait here until the consumer asks and its
 * connection's send buffer has room, then the next one is handed over; `end` lets what waits
 * be taken first. Subclasses decide what waits (one state, or one per key).
 */

import type { SendBuffer } from '../lib/send-buffer.ts';
import { Pullable } from './pullable.ts';

export abstract class NewestStates<T> extends Pullable<T> {
  /** Set by end(): the stream closes once nothing waits. */
  protected ending = false;

  constructor(
    private readonly sendBuffer: SendBuffer | undefined,
    onClose?: () => void,
  ) {
    super(onClose);
  }

  /** Whether a state waits. */
  protected abstract get pending(): boolean;
  /** Takes the next waiting state (called only while one waits). */
  protected abstract takePending(): T;

  /** Ends the stream once what waits is taken (server shutdown). */
  end() {
    if (!this.pending) return this.close();
    this.ending = true;
  }

  /** A next() waits for a state, handed over once the send buffer has room. */
  protected take() {
    return undefined;
  }

  protected override waited() {
    this.handOver();
  }

  protected handOver() {
    if (!this.waiting || !this.pending || this.roomAwaited(this.sendBuffer, () => this.handOver())) return;
    this.hand(this.takePending());
    if (this.ending && !this.pending) queueMicrotask(() => this.close());
  }
}
