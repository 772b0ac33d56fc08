/**
 * A bounded map whose entries expire: hints a process keeps (which runs exist, a run's last
 * seq, a unit's last token) that are worth a read saved, never worth trusting for long. Time
 * comes from the clock it is given, the same clock the rest of its owner uses.
 */
export interface TtlCacheOptions {
  /** Entries kept at most; past it the least recently set one is dropped. */
  max: number;
  /** How long an entry is trusted. */
  ttlMs: number;
  /** The clock, in ms. */
  now: () => number;
}

export class TtlCache<K, V> {
  private readonly entries = new Map<K, { value: V; until: number }>();

  constructor(private readonly options: TtlCacheOptions) {}

  /** The value, if set within the last ttlMs. */
  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.until <= this.options.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: K, value: V) {
    this.entries.delete(key);
    this.entries.set(key, { value, until: this.options.now() + this.options.ttlMs });
    if (this.entries.size > this.options.max) this.entries.delete(this.entries.keys().next().value as K);
  }

  delete(key: K) {
    this.entries.delete(key);
  }

  get size() {
    return this.entries.size;
  }
}
