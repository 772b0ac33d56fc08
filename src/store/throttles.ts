/**
 * Throughput throttles met by this process's writes, by operation (for /metrics): every
 * throttled request, and the ones whose retries ran out so that the caller was refused.
 */
import { type Backoff, delayFor } from '../lib/backoff.ts';

/** What a write was doing when it was throttled: the metric's `operation` label. */
export type Operation = 'append' | 'charge' | 'checkpoint' | 'create' | 'transition' | 'step' | 'claim' | 'lease' | 'output' | 'write';

/** How a throttled write is tried again. */
export interface ThrottleRetry {
  /** Tries before THROTTLED reaches the caller (the SDK's own tries come first, for a lone request). */
  attempts: number;
  backoff: Backoff;
}

/** Ten tries, waits growing (25, 50, ... 1,000 ms at most) and jittered, so writers throttled together spread out over the partition's refill. */
export const THROTTLE_RETRY: ThrottleRetry = { attempts: 10, backoff: { firstMs: 25, maxMs: 1_000, jitter: 'full' } };

/** The wait before the throttled write's next try (`attempt`: 0 after the first throttle). */
export const throttleDelay = (retry: ThrottleRetry, attempt: number) => delayFor(retry.backoff, attempt);

export class ThrottleCounts {
  /** Requests refused for throughput, by operation (each one, retried or not). */
  readonly throttled: Partial<Record<Operation, number>> = {};
  /** Operations refused to their caller as THROTTLED once the retries ran out. */
  readonly refused: Partial<Record<Operation, number>> = {};

  count(operation: Operation) {
    this.throttled[operation] = (this.throttled[operation] ?? 0) + 1;
  }

  gaveUp(operation: Operation) {
    this.refused[operation] = (this.refused[operation] ?? 0) + 1;
  }
}

/** Throttles a write already tried again THROTTLE_RETRY's times: whoever gets one passes it on, never retries it. */
const retriedOut = new WeakSet<object>();

export const markRetriedOut = (err: unknown) => {
  if (err && typeof err === 'object') retriedOut.add(err);
};

export const wasRetriedOut = (err: unknown) => Boolean(err && typeof err === 'object' && retriedOut.has(err));
