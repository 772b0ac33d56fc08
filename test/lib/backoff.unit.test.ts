import { describe, expect, test } from 'vitest';
import { delayFor, retrying } from '../../src/lib/backoff.ts';

describe('back-off', () => {
  test('delays grow by the factor up to the cap; full jitter stays below them', () => {
    const backoff = { firstMs: 100, maxMs: 1_000 };
    expect([0, 1, 2, 3, 4, 5].map((n) => delayFor(backoff, n))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    for (let n = 0; n < 50; n++) expect(delayFor({ ...backoff, jitter: 'full' }, 3)).toBeLessThanOrEqual(800);
  });

  test('retrying stops at success, at an error it may not retry, or when its attempts are used', async () => {
    const quick = { firstMs: 0, maxMs: 0 };
    let calls = 0;
    await expect(
      retrying(async () => (++calls < 3 ? Promise.reject(new Error('again')) : 'ok'), {
        attempts: 5,
        retryable: () => true,
        backoff: quick,
      }),
    ).resolves.toBe('ok');
    expect(calls).toBe(3);
    calls = 0;
    await expect(
      retrying(async () => Promise.reject(new Error(`no ${++calls}`)), { attempts: 5, retryable: () => false, backoff: quick }),
    ).rejects.toThrow('no 1');
    calls = 0;
    await expect(
      retrying(async () => Promise.reject(new Error(`no ${++calls}`)), { attempts: 4, retryable: () => true, backoff: quick }),
    ).rejects.toThrow('no 4');
  });
});
