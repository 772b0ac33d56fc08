/** Waits until `condition` returns true (polling), or fails after the deadline with what it waited for. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  { timeoutMs = 30_000, intervalMs = 10, what = 'condition' }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
