/**
 * The newest state of each of many things (a tenant's runs, its leases), for one subscriber:
 * changes of one key while it waits are merged into one, so a burst on one run costs one
 * slot. Keys waiting are bounded: past `max` the subscriber has fallen too far behind to be
 * told what changed, and the stream fails saying so (its client lists again and resubscribes).
 * While the connection's send buffer is full nothing is handed over.
 */

import type { SendBuffer } from '../lib/send-buffer.ts';
import { NewestStates } from './newest-states.ts';

export interface KeyedLatestOptions {
  /** Keys waiting at most; one more fails the stream with `overflow()`. */
  max: number;
  overflow: () => Error;
  sendBuffer?: SendBuffer;
  onClose?: () => void;
}

export class KeyedLatest<V> extends NewestStates<{ key: string; value: V }> {
  private readonly waitingByKey = new Map<string, V>();
  private scheduled = false;

  constructor(private readonly options: KeyedLatestOptions) {
    super(options.sendBuffer, options.onClose);
  }

  get waitingKeys() {
    return this.waitingByKey.size;
  }

  /** Merges a change into what waits for `key`; `merge` returns undefined when the change is not newer. */
  offer(key: string, merge: (waiting: V | undefined) => V | undefined) {
    if (this.done || this.ending) return;
    const waiting = this.waitingByKey.get(key);
    const next = merge(waiting);
    if (next === undefined) return;
    if (waiting === undefined && this.waitingByKey.size >= this.options.max) return this.fail(this.options.overflow());
    this.waitingByKey.set(key, next);
    // Changes published together (a run and its budget, a batch of stream records) merge before one is handed over.
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => {
        this.scheduled = false;
        this.handOver();
      });
    }
  }

  protected get pending() {
    return this.waitingByKey.size > 0;
  }

  protected takePending() {
    const [key, value] = this.waitingByKey.entries().next().value as [string, V];
    this.waitingByKey.delete(key);
    return { key, value };
  }

  protected cleanUp() {
    this.waitingByKey.clear();
  }
}
