/**
 * In-process fan-out. Changes come from the stream poller (every writer) and from this
 * server's own mutations (the fast path); subscribers order and deduplicate them.
 */
import { type Change, tenantTopicOf, topicOf } from './changes.ts';

export interface Listener {
  change(change: Change): void;
  /** Changes may have been lost (a trimmed or vanished stream): re-read from the table. */
  resync(): void;
  /**
   * Changes may not be arriving (Redis is degraded): read what is new from the table, now and
   * again until they do. A feed that cannot read the table this way (a tenant-wide one) ignores
   * it and is resynced once it ends.
   */
  refill?(): void;
}

export class Hub {
  private readonly listeners = new Map<string, Set<Listener>>();

  /** @param onError where a listener's failure goes: it never reaches the publisher or the other listeners */
  constructor(private readonly onError: (err: unknown) => void) {}

  publish(change: Change) {
    for (const listener of this.listeners.get(topicOf(change)) ?? []) this.call(() => listener.change(change));
    const tenantWide = tenantTopicOf(change);
    for (const listener of (tenantWide && this.listeners.get(tenantWide)) || []) this.call(() => listener.change(change));
  }

  resync() {
    for (const set of this.listeners.values()) for (const listener of set) this.call(() => listener.resync());
  }

  refill() {
    for (const set of this.listeners.values()) for (const listener of set) if (listener.refill) this.call(() => listener.refill?.());
  }

  private call(notify: () => void) {
    try {
      notify();
    } catch (err) {
      this.onError(err);
    }
  }

  /** @returns the unsubscribe function */
  subscribe(topic: string, listener: Listener) {
    const set = this.listeners.get(topic) ?? new Set<Listener>();
    this.listeners.set(topic, set);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(topic) === set) this.listeners.delete(topic);
    };
  }

  /** Listeners on one topic now. */
  listenersOf(topic: string) {
    return this.listeners.get(topic)?.size ?? 0;
  }

  get subscriberCount() {
    let count = 0;
    for (const set of this.listeners.values()) count += set.size;
    return count;
  }
}
