/**
 * Retry policy: back-off with full jitter, bounded by attempts and by a deadline. The client
 * keeps its own (it shares no code with the server); the shape follows the server's lib/backoff.
 */
import type { RunplaneError } from './errors.ts';

export interface RetryPolicy {
  /** Attempts in all, the first included (1: no retry). */
  maxAttempts: number;
  /** The first delay's ceiling; each next one doubles, up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** No retry starts later than this after the first attempt. */
  deadlineMs: number;
}

/**
 * Requests: tried again until 30 s have passed since the first attempt (a server restarting, a
 * deploy), however many attempts that takes; waits grow from 100 ms to at most 5 s.
 */
export const defaultRetry: RetryPolicy = { maxAttempts: Number.POSITIVE_INFINITY, baseDelayMs: 100, maxDelayMs: 5_000, deadlineMs: 30_000 };
/** Streams: counted from the last time the stream was connected, so a long-lived stream survives many outages. */
export const defaultReconnect: RetryPolicy = { maxAttempts: 20, baseDelayMs: 250, maxDelayMs: 5_000, deadlineMs: 120_000 };

/** The delay before retry number `retry` (0 for the first): random up to the doubled ceiling. */
export function delayFor(policy: RetryPolicy, retry: number, error?: RunplaneError) {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  const asked = Number(error?.details.retryAfterMs);
  // The server said when (RATE_LIMITED): no sooner than that.
  return Math.max(Math.random() * ceiling, Number.isFinite(asked) ? asked : 0);
}

/** Waits `ms`; rejects with the signal's reason if it aborts first. */
export function sleep(ms: number, signal?: AbortSignal) {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/** Counts failures against a policy: whether another try is allowed, and after how long. */
export class Attempts {
  private failures = 0;
  private since = Date.now();

  constructor(private readonly policy: RetryPolicy) {}

  /** The delay before trying again after `error`, or undefined when the error or the policy says stop. */
  next(error: RunplaneError): number | undefined {
    if (!error.retryable) return undefined;
    this.failures++;
    const delay = delayFor(this.policy, this.failures - 1, error);
    if (this.failures >= this.policy.maxAttempts || Date.now() + delay - this.since > this.policy.deadlineMs) return undefined;
    return delay;
  }

  /** Things went well (a stream connected): the count starts again. */
  reset() {
    this.failures = 0;
    this.since = Date.now();
  }

  get count() {
    return this.failures;
  }
}
