import { describe, expect, test } from 'vitest';
import { TtlCache } from '../../src/lib/ttl-cache.ts';
import { manualClock } from '../support/engine.ts';

describe('TtlCache', () => {
  test('an entry is trusted for ttlMs on the given clock, then gone', () => {
    const clock = manualClock(1_000);
    const cache = new TtlCache<string, number>({ max: 10, ttlMs: 100, now: clock.now });
    cache.set('a', 1);
    clock.advance(99);
    expect(cache.get('a')).toBe(1);
    clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  test('past max, the entry set least recently is dropped', () => {
    const cache = new TtlCache<string, number>({ max: 2, ttlMs: 1_000, now: () => 0 });
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 3);
    cache.set('c', 4);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([3, undefined, 4]);
    expect(cache.size).toBe(2);
  });
});
