/**
 * In-process fan-out. Changes come from the stream poller (every writer) and from this
 * server's own mutations (the fast path); subscribers order and deduplicate them.
 *
 * While a run's events have listeners here, the hub also knows where the run ends: a table read
 * made while they listened (noteEnd), moved on by every event published since. A subscriber
 * starting live on the run starts there without reading the table again: every event written
 * after it came is published to it here (or its feed reads it on a resync), so it misses none;
 * events still on their way when it came reach it as live ones. Changes may have been lost
 * (resync) or may not be arriving (refill): then the end is read again.
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

/** A topic's listeners and, for a run's events, the last seq known while they listened (undefined: read it). */
interface Topic {
  listeners: Set<Listener>;
  end: number | undefined;
}

export class Hub {
  private readonly topics = new Map<string, Topic>();

  /** @param onError where a listener's failure goes: it never reaches the publisher or the other listeners */
  constructor(private readonly onError: (err: unknown) => void) {}

  publish(change: Change) {
    const topic = this.topics.get(topicOf(change));
    if (topic) {
      if (change.kind === 'event' && topic.end !== undefined && change.event.seq > topic.end) topic.end = change.event.seq;
      for (const listener of topic.listeners) this.call(() => listener.change(change));
    }
    const tenantWide = tenantTopicOf(change);
    for (const listener of (tenantWide && this.topics.get(tenantWide)?.listeners) || []) this.call(() => listener.change(change));
  }

  resync() {
    for (const topic of this.topics.values()) {
      topic.end = undefined;
      for (const listener of topic.listeners) this.call(() => listener.resync());
    }
  }

  refill() {
    for (const topic of this.topics.values()) {
      topic.end = undefined;
      for (const listener of topic.listeners) if (listener.refill) this.call(() => listener.refill?.());
    }
  }

  /** Where the run's events end as known here (see above), or undefined when it must be read. */
  endOf(topic: string) {
    return this.topics.get(topic)?.end;
  }

  /**
   * The run's last seq as read from the table by `listener`, which was listening on the topic
   * before its read began: kept while the topic has listeners (a listener gone makes it moot).
   */
  noteEnd(topic: string, listener: Listener, seq: number) {
    const known = this.topics.get(topic);
    if (!known?.listeners.has(listener)) return;
    known.end = Math.max(known.end ?? seq, seq);
  }

  private call(notify: () => void) {
    try {
      notify();
    } catch (err) {
      this.onError(err);
    }
  }

  /** @returns the unsubscribe function */
  subscribe(name: string, listener: Listener) {
    let topic = this.topics.get(name);
    if (!topic) {
      topic = { listeners: new Set<Listener>(), end: undefined };
      this.topics.set(name, topic);
    }
    const { listeners } = topic;
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.topics.get(name)?.listeners === listeners) this.topics.delete(name);
    };
  }

  /** Listeners on one topic now. */
  listenersOf(topic: string) {
    return this.topics.get(topic)?.listeners.size ?? 0;
  }

  get subscriberCount() {
    let count = 0;
    for (const topic of this.topics.values()) count += topic.listeners.size;
    return count;
  }
}
