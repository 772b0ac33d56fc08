/**
 * withLease: run a function while holding a unit's lease. Acquires (waiting while another
 * owner's lease is live, up to `waitMs`), renews in the background well before expiry, aborts
 * the function's signal the moment the lease is lost or cannot be renewed before it expires,
 * and releases at the end, also when the function throws.
 */

import { clientCodes, RunplaneError } from './errors.ts';
import type { Mutations } from './mutations.ts';
import { sleep } from './retry.ts';
import { anySignal } from './signals.ts';
import type { LeaseState } from './state-streams.ts';

export interface LeaseOptions {
  unitId: string;
  /** Who holds it (a worker id). */
  owner: string;
  /** How long the lease lasts unless renewed (1 to 604800). */
  ttlSeconds: number;
  /** How long to wait for another owner's lease to end before giving up (LEASE_HELD). Default 0: one try. */
  waitMs?: number;
  /** Abandons the wait, and aborts the function's signal. */
  signal?: AbortSignal;
}

export interface LeaseContext {
  /** The fencing token: pass it to every resource you write to, which rejects smaller ones. */
  token: number;
  /** Aborted the moment the lease is lost, or would expire before a renewal gets through. */
  signal: AbortSignal;
  lease: LeaseState;
}

/** Polling a held unit: from this delay, doubling, never past the cap (nor past the lease's expiry). */
const WAIT = { firstMs: 50, maxMs: 500 };
/** Renewals are sent every third of the TTL, so two can fail before the lease runs out. */
const RENEWALS_PER_TTL = 3;
/** The signal aborts this fraction of the TTL before the lease could expire: time for the function to stop writing. */
const SAFETY_FRACTION = 0.1;

export async function withLease<T>(mutations: Mutations, options: LeaseOptions, fn: (context: LeaseContext) => Promise<T>): Promise<T> {
  const { lease, sentAt } = await acquire(mutations, options);
  const held = hold(mutations, options, lease, sentAt);
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    outcome = { ok: true, value: await fn({ token: lease.token, signal: held.signal, lease }) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  await held.stop();
  // Also after a loss: if the lease is still ours (a renewal was only slow), the unit is free at once.
  await mutations
    .releaseLease({ unitId: options.unitId, owner: options.owner, token: lease.token }, { retry: { maxAttempts: 3 } })
    .catch(() => undefined);
  if (held.lost)
    throw new RunplaneError(held.lost.code, held.lost.message, {
      details: held.lost.details,
      cause: outcome.ok ? undefined : outcome.error,
    });
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

async function acquire(mutations: Mutations, { unitId, owner, ttlSeconds, waitMs = 0, signal }: LeaseOptions) {
  const giveUpAt = Date.now() + waitMs;
  for (let tries = 0; ; tries++) {
    const sentAt = Date.now();
    // A new key for each try: a retry of this one (same key) would only repeat its refusal.
    const answer = await mutations.acquireLease({ unitId, owner, ttlSeconds }, { signal });
    if (answer.__typename === 'Lease') return { lease: answer, sentAt };
    if (answer.__typename === 'IdempotencyConflict') throw new RunplaneError('BAD_REQUEST', answer.message);
    const untilExpiry = Date.parse(answer.expiresAt) - Date.now();
    const delay = Math.max(10, Math.min(untilExpiry, Math.random() * Math.min(WAIT.maxMs, WAIT.firstMs * 2 ** tries)));
    if (Date.now() + delay > giveUpAt) {
      throw new RunplaneError(clientCodes.leaseHeld, `unit ${unitId} is held by ${answer.holder} until ${answer.expiresAt}`, {
        details: { unitId, holder: answer.holder, expiresAt: answer.expiresAt },
      });
    }
    await sleep(delay, signal);
  }
}

/** Keeps the lease: renewals in the background, and the signal that says it is gone. */
function hold(mutations: Mutations, { unitId, owner, ttlSeconds, signal }: LeaseOptions, lease: LeaseState, acquiredSentAt: number) {
  const ttlMs = ttlSeconds * 1000;
  const aborter = new AbortController();
  const stopping = new AbortController();
  let lost: RunplaneError | undefined;
  let expiry: ReturnType<typeof setTimeout> | undefined;

  const lose = (error: RunplaneError) => {
    if (lost || stopping.signal.aborted) return;
    lost = error;
    clearTimeout(expiry);
    aborter.abort(error);
  };
  /** The lease is known good until `sentAt` (when the request that extended it was sent) plus the TTL. */
  const confirmed = (sentAt: number) => {
    clearTimeout(expiry);
    const abortIn = sentAt + ttlMs * (1 - SAFETY_FRACTION) - Date.now();
    expiry = setTimeout(
      () =>
        lose(
          new RunplaneError(clientCodes.leaseLost, `the lease on unit ${unitId} could not be renewed before it expired`, {
            retryable: false,
            details: { unitId },
          }),
        ),
      Math.max(0, abortIn),
    );
    return sentAt + ttlMs * (1 - SAFETY_FRACTION);
  };
  const onCallerAbort = () => aborter.abort(signal?.reason);
  signal?.addEventListener('abort', onCallerAbort, { once: true });

  const renewing = (async () => {
    let validUntil = confirmed(acquiredSentAt);
    while (!lost && !stopping.signal.aborted) {
      try {
        await sleep(ttlMs / RENEWALS_PER_TTL, stopping.signal);
        const sentAt = Date.now();
        // Waiting past the point the lease may have run out is pointless: the signal has aborted by then.
        const until = AbortSignal.timeout(Math.max(1, validUntil - sentAt));
        const answer = await mutations.renewLease(
          { unitId, owner, token: lease.token, ttlSeconds },
          { signal: anySignal([stopping.signal, until]), retry: { deadlineMs: Math.max(0, validUntil - sentAt) } },
        );
        if (answer.__typename === 'Lease') validUntil = confirmed(sentAt);
        else
          lose(
            new RunplaneError(clientCodes.leaseLost, answer.message, {
              retryable: false,
              details: { unitId, ...('currentHolder' in answer ? { holder: answer.currentHolder, token: answer.currentToken } : {}) },
            }),
          );
      } catch {
        // Stopped, or this renewal failed: the next one tries again, and the expiry timer decides.
      }
    }
  })();

  return {
    signal: aborter.signal,
    get lost() {
      return lost;
    },
    async stop() {
      stopping.abort();
      clearTimeout(expiry);
      signal?.removeEventListener('abort', onCallerAbort);
      await renewing;
    },
  };
}
