/**
 * In-process fan-out. Changes come from the stream poller (every writer) and from this
 * server's own mutations (the fast path); subscribers order and deduplicate them.
 *
 * While a run's events have listeners here, the hub also knows where the run ends, for
 * subscribers starting live on it (endFor): a table read, moved on by every event published
 * since, trusted for a second after the read began. Such a subscriber starts there without
 * reading the table. Every event written after that read began (the point "live from now"
 * starts at, as with a read of its own) is published to it here, or its feed reads it on a
 * resync; events still on their way when it came reach it as live ones.
 * The end is read again when changes may have been lost (resync) or may not be arriving
 * (refill), when the run is created (its id may be used again once its rows expired), and a
 * second after the last read: rows removed from the table are not published, and an end that
 * outlived them would start new subscribers past events yet to be written. The one case left:
 * a run's rows expiring and its id used again on another replica, all within that second and
 * before this hub hears of the new run (see the README's note on `runEvents`).
 */
import { type Change, tenantTopicOf, topicOf, topics } from './changes.ts';

export interface Listener {
  change(change: Change): void;
  /** Changes may have been lost (a trimmed or vanished stream): re-read from the table. */
  resync(): void;
  /**
   * Changes may not be arriving (Redis is degraded): read what is new from the table, now and
   * again until they do. A feed that cannot read the table this way (a tenant-wide one) ignores
   * it and is resynced once it ends. Also called once for a change that came as a notice.
   */
  refill?(): void;
}

/** A topic's listeners and, for a run's events, the last seq known while they listened (undefined: read it). */
interface Topic {
  listeners: Set<Listener>;
  end: number | undefined;
  /** When the last read of the end from the table began. */
  readAt: number;
  /** How often the end was forgotten: a read begun before the last time says nothing now. */
  forgotten: number;
  /** The read of the end under way, and how often the end had been forgotten when it began. */
  reading: { seq: Promise<number>; mark: number } | undefined;
}

/** How long after a read of a run's end it is trusted (see above). */
export const END_TRUSTED_MS = 1_000;

export class Hub {
  private readonly topics = new Map<string, Topic>();

  /**
   * @param onError where a listener's failure goes: it never reaches the publisher or the other listeners
   * @param now the clock the trust in a run's end is kept on (monotonic: a wall clock set back would stretch it)
   */
  constructor(
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  publish(change: Change) {
    // A run created anew may carry the id of one whose rows expired: its end is read again.
    if (change.kind === 'run' && change.run.version === 1) this.forgetEnd(topics.events(change.tenant, change.runId));
    const topic = this.topics.get(topicOf(change));
    if (topic) {
      if (change.kind === 'event' && topic.end !== undefined && change.event.seq > topic.end) topic.end = change.event.seq;
      this.tell(topic.listeners, change);
    }
    const tenantWide = tenantTopicOf(change);
    const wide = tenantWide && this.topics.get(tenantWide);
    if (wide) this.tell(wide.listeners, change);
  }

  /** A change to every listener of a topic (twice per event and subscriber: no closure per call). */
  private tell(listeners: Set<Listener>, change: Change) {
    for (const listener of listeners) {
      try {
        listener.change(change);
      } catch (err) {
        this.onError(err);
      }
    }
  }

  resync() {
    for (const topic of this.topics.values()) {
      this.forget(topic);
      for (const listener of topic.listeners) this.call(() => listener.resync());
    }
  }

  refill() {
    for (const topic of this.topics.values()) {
      this.forget(topic);
      for (const listener of topic.listeners) if (listener.refill) this.call(() => listener.refill?.());
    }
  }

  /** A change of one topic came without its content (a Redis notice): its listeners read what is new from the table. */
  refillTopic(name: string) {
    const topic = this.topics.get(name);
    if (!topic) return;
    this.forget(topic);
    for (const listener of topic.listeners) if (listener.refill) this.call(() => listener.refill?.());
  }

  /** Where the run's events end as known here (see above), or undefined when it must be read. */
  endOf(topic: string) {
    const known = this.topics.get(topic);
    return known && this.now() - known.readAt <= END_TRUSTED_MS ? known.end : undefined;
  }

  /**
   * Where the run's events end, for `listener` (listening on the topic) starting live: the end
   * as known here, or `read` from the table. A read under way for another listener is shared,
   * if the end has not been forgotten since it began (its answer may describe rows gone since,
   * and is not kept either). If a shared read fails, each listener that joined it reads again.
   * A read's answer is kept beside an end still trusted as the greater (a read may be behind
   * the events published while it ran, never ahead); an end no longer trusted gives way to it.
   */
  endFor(topic: string, listener: Listener, read: () => Promise<number>): Promise<number> {
    const known = this.topics.get(topic);
    if (!known?.listeners.has(listener)) return read();
    const trusted = this.endOf(topic);
    if (trusted !== undefined) return Promise.resolve(trusted);
    const under = known.reading;
    if (under && under.mark === known.forgotten) return under.seq.catch(() => read());
    const mark = known.forgotten;
    // Trusted from when the table was read, not from when the answer came (it may come late).
    const began = this.now();
    const seq = read().then((last) => {
      if (known.forgotten === mark) {
        const still = this.endOf(topic);
        known.end = still === undefined ? last : Math.max(still, last);
        known.readAt = began;
      }
      return last;
    });
    const reading = { seq, mark };
    known.reading = reading;
    const done = () => {
      if (known.reading === reading) known.reading = undefined;
    };
    seq.then(done, done);
    return seq;
  }

  private forgetEnd(topic: string) {
    const known = this.topics.get(topic);
    if (known) this.forget(known);
  }

  private forget(topic: Topic) {
    topic.end = undefined;
    topic.forgotten++;
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
      topic = { listeners: new Set<Listener>(), end: undefined, readAt: 0, forgotten: 0, reading: undefined };
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
