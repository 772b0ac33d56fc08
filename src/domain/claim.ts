/**
 * Run claims as decisions: given the run's claim row (or none), a command and the clock, the
 * new claim or the refusal. No I/O: the store writes what these decide, conditioned on the
 * row it read. A claim is a lease on the run itself, with the same fencing rule: every claim
 * hands out a token larger than every token issued before for the run, never below the
 * clock's floor (domain/lease.ts), so a worker that wakes after losing its claim is refused by
 * every write that carries its token.
 */

import { ClaimLost, RunHeld } from './errors.ts';
import { tokenFloor } from './lease.ts';
import type { RunClaim } from './run.ts';

export interface ClaimCommand {
  runId: string;
  holder: string;
  ttlSeconds: number;
}

export interface RenewClaimCommand extends ClaimCommand {
  token: number;
}

export interface ReleaseClaimCommand {
  runId: string;
  holder: string;
  token: number;
}

/** The claim, while it has not run out at `at` and was not ended; null otherwise. */
export const claimLiveAt = (claim: RunClaim | null, at: number) => (claim && !claim.ended && claim.expiresAt.getTime() > at ? claim : null);

/**
 * Takes the run if nobody's claim on it is live, or `holder` holds it already (a new token
 * either way); the token grows past the row's and never falls below the floor.
 * @throws RunHeld while another holder's claim is live
 */
export function takeClaim(row: RunClaim | null, { runId, holder, ttlSeconds }: ClaimCommand, at: number): RunClaim {
  const live = claimLiveAt(row, at);
  if (live && live.holder !== holder) throw new RunHeld(live);
  const floor = tokenFloor(at);
  return {
    runId,
    holder,
    token: row && row.token > 0 ? Math.max(row.token + 1, floor) : floor,
    acquiredAt: new Date(at),
    expiresAt: new Date(at + ttlSeconds * 1000),
    version: (row?.version ?? 0) + 1,
  };
}

/**
 * Extends the holder's live claim to ttlSeconds from `at`.
 * @throws ClaimLost unless `holder` holds it with `token`, and it has not run out
 */
export function renewClaim(row: RunClaim | null, command: RenewClaimCommand, at: number): RunClaim {
  const claim = held(row, command, at, true);
  return { ...claim, expiresAt: new Date(at + command.ttlSeconds * 1000), version: claim.version + 1 };
}

/**
 * Ends the holder's live claim at `at`: the run is free at once, the token is kept. A claim
 * that ran out is no longer the holder's to end (unlike a lease's): its run is the stall
 * watcher's to find, and a release then would hide that the worker had gone.
 * @throws ClaimLost unless `holder` holds it with `token`, and it has not run out
 */
export function releaseClaim(row: RunClaim | null, command: ReleaseClaimCommand, at: number): RunClaim {
  const claim = held(row, command, at, true);
  return { ...claim, expiresAt: new Date(at), version: claim.version + 1, ended: true, endedBy: 'RELEASED' };
}

/** Whether a write fenced with `token` may land: that token is the run's live claim. */
export const fenceHolds = (row: RunClaim | null, token: number, at: number) => claimLiveAt(row, at)?.token === token;

function held(row: RunClaim | null, { runId, holder, token }: ReleaseClaimCommand, at: number, mustBeLive: boolean) {
  if (!row || row.holder !== holder || row.token !== token || (mustBeLive && !claimLiveAt(row, at)))
    throw new ClaimLost(runId, row, at, token);
  return row;
}
