/**
 * A value kept on an object itself, under a symbol, hidden from spreads, JSON and equality
 * checks. The per-event caches (an event's results, a result's JSON, an event's size) were
 * WeakMaps; tens of thousands of short-lived keys a second make every young-generation GC
 * walk the ephemeron tables, and a catch-up of 10,000 events took 1.46x the SDK's Query with
 * them against 1.28x without (median of 9 paired rounds).
 */
export interface Attached<O extends object, V> {
  get(object: O): V | undefined;
  set(object: O, value: V): V;
}

export function attached<O extends object, V>(name: string): Attached<O, V> {
  const key = Symbol(name);
  return {
    get: (object) => (object as Record<symbol, V | undefined>)[key],
    set(object, value) {
      // Not enumerable: a copy ({ ...event, late: true }) must not carry the original's cache.
      Object.defineProperty(object, key, { value, writable: true, configurable: true, enumerable: false });
      return value;
    },
  };
}
