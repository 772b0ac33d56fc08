/** test/support/wait.ts: what every test that waits relies on. */
import { expect, test } from 'vitest';
import { waitFor } from './support/wait.ts';

test('resolves once the condition holds, sync or async', async () => {
  let checks = 0;
  await waitFor(() => ++checks >= 3, { intervalMs: 1 });
  expect(checks).toBe(3);
  let asyncChecks = 0;
  await waitFor(async () => ++asyncChecks >= 3, { intervalMs: 1 });
  expect(asyncChecks).toBe(3);
});

test('fails after the deadline naming what it waited for', async () => {
  await expect(waitFor(() => false, { timeoutMs: 50, what: 'the moon' })).rejects.toThrow('timed out after 50 ms waiting for the moon');
});

test('a check still pending at the deadline fails it too', async () => {
  const never = () => new Promise<boolean>(() => undefined);
  await expect(waitFor(never, { timeoutMs: 50, what: 'an answer' })).rejects.toThrow('timed out after 50 ms waiting for an answer');
});

test("a condition that throws fails it at once, with the condition's error", async () => {
  const started = Date.now();
  await expect(
    waitFor(
      () => {
        throw new Error('broken');
      },
      { timeoutMs: 10_000 },
    ),
  ).rejects.toThrow('broken');
  await expect(waitFor(async () => Promise.reject(new Error('broken later')), { timeoutMs: 10_000 })).rejects.toThrow('broken later');
  // Not by waiting out the deadline (10 s): well before it.
  expect(Date.now() - started).toBeLessThan(5_000);
});
