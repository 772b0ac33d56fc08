/**
 * The newest state of each of many things (a tenant's runs, its leases), for one subscriber:
 * changes of one key while it waits are merged into one, so a burst on one run costs one
 * slot. Keys waiting are bounded: past `max` the subscriber has fallen too far behind to be
 * told what changed, and the stream fails saying so (its client lists again and resubscribes).
 * While the connection's send buffer is full nothing is handed over.
 */
import { Pullable } from './pullable.ts';
import type { SendBuffer } from './send-buffer.ts';

export interface KeyedLatestOptions {
  /** Keys waiting at most; one more fails the stream with `overflow()`. */
  max: number;
  overflow: () => Error;
  sendBuffer?: SendBuffer;
  onClose?: () => void;
}

export class KeyedLatest<V> extends Pullable<{ key: string; value: V }> {
  private readonly pending = new Map<string, V>();
  private cancelRoomWait: (() => void) | undefined;
  private ending = false;
  private scheduled = false;

  constructor(private readonly options: KeyedLatestOptions) {
    super(options.onClose);
  }

  get waitingKeys() {
    return this.pending.size;
  }

  /** Merges a change into what waits for `key`; `merge` returns undefined when the change is not newer. */
  offer(key: string, merge: (waiting: V | undefined) => V | undefined) {
    if (this.done || this.ending) return;
    const waiting = this.pending.get(key);
    const next = merge(waiting);
    if (next === undefined) return;
    if (waiting === undefined && this.pending.size >= this.options.max) return this.fail(this.options.overflow());
    this.pending.set(key, next);
    // Changes published together (a run and its budget, a batch of stream records) merge before one is handed over.
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => {
        this.scheduled = false;
        this.handOver();
      });
    }
  }

  /** Ends the stream once what waits is taken (server shutdown). */
  end() {
    if (this.pending.size === 0) return this.close();
    this.ending = true;
  }

  protected take() {
    return undefined;
  }

  protected override waited() {
    this.handOver();
  }

  private handOver() {
    if (!this.waiting || this.pending.size === 0 || this.cancelRoomWait) return;
    if (this.options.sendBuffer?.full) {
      this.cancelRoomWait = this.options.sendBuffer.whenRoom(1, () => {
        this.cancelRoomWait = undefined;
        this.handOver();
      });
      return;
    }
    const [key, value] = this.pending.entries().next().value as [string, V];
    this.pending.delete(key);
    this.hand({ key, value });
    if (this.ending && this.pending.size === 0) queueMicrotask(() => this.close());
  }

  protected cleanUp() {
    this.pending.clear();
    this.cancelRoomWait?.();
    this.cancelRoomWait = undefined;
  }
}
