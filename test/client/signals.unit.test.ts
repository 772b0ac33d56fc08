import { afterEach, describe, expect, test } from 'vitest';
import { anySignal } from '../../packages/client/src/signals.ts';

const native = AbortSignal.any;

describe.each([
  ['native', native],
  ['by hand (Node before 20.3)', undefined],
])('anySignal, %s', (_name, any) => {
  afterEach(() => {
    AbortSignal.any = native;
  });

  test('aborts with the reason of the first signal that aborts, and only then', () => {
    AbortSignal.any = any as typeof native;
    const [a, b] = [new AbortController(), new AbortController()];
    const combined = anySignal([a.signal, b.signal]);
    expect(combined.aborted).toBe(false);
    b.abort('b went');
    a.abort('a went');
    expect(combined.aborted).toBe(true);
    expect(combined.reason).toBe('b went');
  });

  test('is aborted at once when a signal already is', () => {
    AbortSignal.any = any as typeof native;
    const combined = anySignal([new AbortController().signal, AbortSignal.abort('already')]);
    expect(combined.aborted).toBe(true);
    expect(combined.reason).toBe('already');
  });
});
