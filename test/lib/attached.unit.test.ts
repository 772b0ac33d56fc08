import { describe, expect, it } from 'vitest';
import { attached } from '../../src/lib/attached.ts';

describe('attached', () => {
  const size = attached<object, number>('size');

  it('keeps a value on the object, per object', () => {
    const a = { seq: 1 };
    const b = { seq: 1 };
    expect(size.get(a)).toBeUndefined();
    expect(size.set(a, 42)).toBe(42);
    expect(size.get(a)).toBe(42);
    expect(size.get(b)).toBeUndefined();
    size.set(a, 43);
    expect(size.get(a)).toBe(43);
  });

  it('is not copied by a spread, not in JSON, and not seen by equality', () => {
    const event = { seq: 5, type: 'step' };
    size.set(event, 99);
    const copy = { ...event, late: true };
    expect(size.get(copy)).toBeUndefined();
    expect(JSON.stringify(event)).toBe('{"seq":5,"type":"step"}');
    expect(event).toStrictEqual({ seq: 5, type: 'step' });
    expect(Object.getOwnPropertySymbols(event).every((key) => !Object.getOwnPropertyDescriptor(event, key)?.enumerable)).toBe(true);
  });

  it('two caches of the same name do not share values', () => {
    const other = attached<object, number>('size');
    const event = {};
    size.set(event, 1);
    expect(other.get(event)).toBeUndefined();
  });
});
