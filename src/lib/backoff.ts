/**
 * Waiting before trying again: every retry loop of the server takes its delays from here, so
 * they all grow, cap and jitter alike. Jitter keeps the processes that failed together from
 * meeting again.
 */

export interface Backoff {
  /** The first delay. */
  firstMs: number;
  /** No delay is longer. */
  maxMs: number;
  /** How much each delay grows over the previous one (2: doubling). */
  factor?: number;
  /** 'full': a random delay up to the computed one; 'none': exactly it. */
  jitter?: 'full' | 'none';
}

/** The delay before retry number `attempt` (0 for the first retry). */
export function delayFor({ firstMs, maxMs, factor = 2, jitter = 'none' }: Backoff, attempt: number) {
  const delay = Math.min(maxMs, firstMs * factor ** attempt);
  return jitter === 'full' ? Math.random() * delay : delay;
}

/** Waits `ms`, or until `signal` aborts (whichever comes first). */
export function sleep(ms: number, signal?: AbortSignal) {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, `retryable(err)` says no, or `attempts` are used up; the
 * last error is thrown.
 */
export async function retrying<T>(
  attempt: () => Promise<T>,
  { attempts, retryable, backoff }: { attempts: number; retryable: (err: unknown) => boolean; backoff: Backoff },
): Promise<T> {
  for (let done = 1; ; done++) {
    try {
      return await attempt();
    } catch (err) {
      if (done >= attempts || !retryable(err)) throw err;
      await sleep(delayFor(backoff, done - 1));
    }
  }
}
