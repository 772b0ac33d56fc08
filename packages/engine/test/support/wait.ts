import { vi } from 'vitest';

/**
 * Waits until `condition` returns true, polling it every `intervalMs` with vitest's
 * `vi.waitUntil` (which checks again only once a pending check has settled); after `timeoutMs`
 * it fails naming what it waited for. A condition that throws fails it at once, with its error.
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  { timeoutMs = 30_000, intervalMs = 10, what = 'condition' }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<void> {
  let threw = false;
  const failed = (err: unknown) => {
    threw = true;
    throw err;
  };
  const check = () => {
    try {
      const result = condition();
      return result instanceof Promise ? result.catch(failed) : result;
    } catch (err) {
      return failed(err);
    }
  };
  await vi.waitUntil(check, { timeout: timeoutMs, interval: intervalMs }).catch((err: unknown) => {
    // Anything but the condition's own error is vi.waitUntil's "timed out", which names nothing.
    throw threw ? err : new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  });
}
