/**
 * Approvals: a status change and the event that records it, in ONE transaction (a step,
 * store/runs/step.ts), so the timeline never shows a decision the status does not. The
 * request may be fenced by the run's claim; a rejection ends the run, and its claim with it.
 */

import { claimLiveAt } from '../../domain/claim.ts';
import { ClaimLost, StatusConflict } from '../../domain/errors.ts';
import { type Run, type RunEvent, type RunStatus, type ServerEventType, stallable } from '../../domain/run.ts';
import { toClaim } from '../../table/codec.ts';
import { storedResult } from '../../table/stored-results.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { claimEnd, claimRelisting, fence } from './claim-writes.ts';
import type { Steps } from './step.ts';

export interface ApprovalStep {
  tenant: string;
  runId: string;
  from: RunStatus;
  to: RunStatus;
  expectedVersion?: number;
  /** The event recorded with the change. */
  type: ServerEventType;
  payload: unknown;
  /** Only while this token is the run's live claim (ClaimLost otherwise). */
  fencingToken?: number;
}

export interface ApprovalResult {
  run: Run;
  event: RunEvent;
}

export function createApprovals({ tableName }: StoreDeps, { idempotency, steps }: { idempotency: Idempotency; steps: Steps }) {
  /** @throws StatusConflict, RunNotFound, ClaimLost, Contention */
  const step = (input: ApprovalStep, claim?: Parameters<Steps['step']>[3]) =>
    steps.step(
      input.tenant,
      input.runId,
      ({ run, claim, at }) => {
        const versionWrong = input.expectedVersion !== undefined && input.expectedVersion !== run.version;
        if (run.status !== input.from || versionWrong)
          throw new StatusConflict(input.runId, input.from, run.status, run.version, input.expectedVersion);
        const { fencingToken: token } = input;
        return {
          to: input.to,
          type: input.type,
          payload: input.payload,
          also: (expires) => {
            if (expires !== undefined) return [claimEnd(tableName, input.tenant, input.runId, at, { token, expires, why: 'FINISHED' })];
            // Approved: the run can stall again, so its claim goes back in the stall index (the
            // watcher takes an expired claim out while its run awaits approval).
            // An ended claim (released, say) stays out: nobody holds the run to be found gone.
            if (stallable.has(input.to) && claim && !claim.ended) return [claimRelisting(tableName, input.tenant, claim, at, token)];
            return token !== undefined ? [fence(tableName, input.tenant, input.runId, token, at)] : [];
          },
          refusal: (_, found) => {
            const now = toClaim(found);
            if (token !== undefined && !(now?.token === token && claimLiveAt(now, at))) return new ClaimLost(input.runId, now, at, token);
            // Unfenced, or still the token's: the claim moved (renewed, say) since the read; decide again.
            return undefined;
          },
        };
      },
      claim,
    );

  return {
    /**
     * Moves the run from `from` to `to` and appends the event, together, at most once per key.
     * @throws StatusConflict when the run is not in `from` (or not at expectedVersion)
     * @throws RunNotFound
     * @throws ClaimLost when fenced by a token that is not the run's live claim
     * @throws IdempotencyConflict when the key was used for another request
     */
    async decide(input: ApprovalStep, idem?: IdempotencyKey): Promise<ApprovalResult> {
      if (!idem) return step(input);
      return idempotency.once<ApprovalResult>(idem, {
        perform: (claim) => step(input, claim),
        encode: ({ run, event }) => ({ run, event }),
        decode: storedResult<ApprovalResult>,
      });
    },
  };
}

export type Approvals = ReturnType<typeof createApprovals>;
