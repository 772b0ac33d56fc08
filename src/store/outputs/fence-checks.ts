/**
 * A fenced output write is checked against its run's claim before it is accepted. The claim
 * read is kept a while, and dropped as soon as its run changes (a cancel, a takeover), so a
 * stream of writes costs a read now and then; the flush's fence is the real check.
 */
import { fenceHolds } from '../../domain/claim.ts';
import { ClaimLost } from '../../domain/errors.ts';
import type { RunClaim } from '../../domain/run.ts';

export interface FenceCheckOptions {
  /** The run's claim as stored (a fenced write is checked against it). */
  claimOf: (tenant: string, runId: string) => Promise<RunClaim | null>;
  /** Calls `changed` when the run or its claim changes (the claim read is then read again); returns the unsubscribe. */
  watchRun: (tenant: string, runId: string, changed: () => void) => () => void;
  now: () => number;
  /** Claims kept at most (the oldest read is dropped past it). */
  most: number;
}

/** How long a claim read for a fenced write is trusted, unless the run changes first (the flush's fence is the real check). */
const CLAIM_TRUST_MS = 5_000;

/** @returns the check: it throws ClaimLost unless `token` holds the run's claim now */
export function fenceChecks(options: FenceCheckOptions) {
  const { now } = options;
  /** Claims read for fenced writes, each dropped as soon as its run changes (a cancel, a takeover). */
  const claims = new Map<string, { claim: RunClaim | null; readAt: number; unwatch: () => void }>();

  function forgetClaim(key: string) {
    claims.get(key)?.unwatch();
    claims.delete(key);
  }

  return async function checkFence(tenant: string, runId: string, token: number) {
    const key = `${tenant}\u0000${runId}`;
    let known = claims.get(key);
    if (!known || now() - known.readAt > CLAIM_TRUST_MS || !fenceHolds(known.claim, token, now())) {
      known?.unwatch();
      claims.delete(key);
      // Watched before the read: a change landing meanwhile drops what is read.
      let changed = false;
      const unwatch = options.watchRun(tenant, runId, () => {
        changed = true;
        forgetClaim(key);
      });
      let claim: Awaited<ReturnType<typeof options.claimOf>>;
      try {
        claim = await options.claimOf(tenant, runId);
      } catch (err) {
        unwatch();
        throw err;
      }
      known = { claim, readAt: now(), unwatch };
      if (changed) unwatch();
      else {
        forgetClaim(key);
        claims.set(key, known);
        if (claims.size > options.most) forgetClaim(claims.keys().next().value as string);
      }
    }
    if (!fenceHolds(known.claim, token, now())) throw new ClaimLost(runId, known.claim, now(), token);
  };
}
