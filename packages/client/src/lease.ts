/**
 * withLease: run a function while holding a unit's lease. Acquires (waiting while another
 * owner's lease is live, up to `waitMs`), renews in the background well before expiry, aborts
 * the function's signal the moment the lease is lost or cannot be renewed before it expires,
 * and releases at the end, also when the function throws.
 */

import { clientCodes, RunplaneError } from './errors.ts';
import { askWhileHeld, holdRenewed, whileHeld } from './held.ts';
import type { Mutations } from './mutations.ts';
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

export async function withLease<T>(mutations: Mutations, options: LeaseOptions, fn: (context: LeaseContext) => Promise<T>): Promise<T> {
  const { lease, sentAt } = await acquire(mutations, options);
  const held = hold(mutations, options, lease, sentAt);
  return whileHeld(
    held,
    () => fn({ token: lease.token, signal: held.signal, lease }),
    () => mutations.releaseLease({ unitId: options.unitId, owner: options.owner, token: lease.token }, { retry: { maxAttempts: 3 } }),
  );
}

async function acquire(mutations: Mutations, { unitId, owner, ttlSeconds, waitMs, signal }: LeaseOptions) {
  return askWhileHeld<{ lease: Extract<Awaited<ReturnType<Mutations['acquireLease']>>, { __typename: 'Lease' }>; sentAt: number }>(
    { waitMs, signal },
    async () => {
      const sentAt = Date.now();
      // A new key for each try: a retry of this one (same key) would only repeat its refusal.
      const answer = await mutations.acquireLease({ unitId, owner, ttlSeconds }, { signal });
      if (answer.__typename === 'Lease') return { granted: { lease: answer, sentAt } };
      if (answer.__typename === 'IdempotencyConflict') throw new RunplaneError('BAD_REQUEST', answer.message);
      return { held: answer };
    },
    ({ holder, expiresAt }) =>
      new RunplaneError(clientCodes.leaseHeld, `unit ${unitId} is held by ${holder} until ${expiresAt}`, {
        details: { unitId, holder, expiresAt },
      }),
  );
}

/** Keeps the lease: renewals in the background, and the signal that says it is gone. */
function hold(mutations: Mutations, { unitId, owner, ttlSeconds, signal }: LeaseOptions, lease: LeaseState, acquiredSentAt: number) {
  const leaseLost = (message: string, details: Record<string, unknown> = {}) =>
    new RunplaneError(clientCodes.leaseLost, message, { retryable: false, details: { unitId, ...details } });
  return holdRenewed(
    {
      ttlSeconds,
      signal,
      async renew(call) {
        const answer = await mutations.renewLease({ unitId, owner, token: lease.token, ttlSeconds }, call);
        if (answer.__typename === 'Lease') return undefined;
        const holder = 'currentHolder' in answer ? { holder: answer.currentHolder, token: answer.currentToken } : {};
        return { error: leaseLost(answer.message, holder) };
      },
      expired: () => leaseLost(`the lease on unit ${unitId} could not be renewed before it expired`),
    },
    acquiredSentAt,
  );
}
