/**
 * Run claims: which worker holds a run (a lease on the run itself, in its partition), taken,
 * renewed and released with a fencing token; a run cancelled (its claim ended with it); and a
 * claimed run found stalled once its claim ran out, then taken over. Decisions are
 * domain/claim.ts's; each is written conditioned on the rows it was decided on.
 */

import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { claimLiveAt, releaseClaim, renewClaim, takeClaim } from '../../domain/claim.ts';
import { ClaimLost, Contention, RunHeld, RunNotFound, StatusConflict } from '../../domain/errors.ts';
import { isTerminal, type Run, type RunClaim, type RunEvent, type RunStatus, stallable } from '../../domain/run.ts';
import { toClaim, toRun } from '../../table/codec.ts';
import { storedResult } from '../../table/stored-results.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { ConditionFailed, type TransactItem, write } from '../write.ts';
import { claimEnd, claimPut, claimUnlisting, holderUpdate, statusStill } from './claim-writes.ts';
import { readExpiredClaims } from './stall-index.ts';
import type { StepResult, Steps } from './step.ts';

export interface ClaimRun {
  tenant: string;
  runId: string;
  holder: string;
  ttlSeconds: number;
}

export interface HolderCommand {
  tenant: string;
  runId: string;
  holder: string;
  token: number;
}

export interface CancelRun {
  tenant: string;
  runId: string;
  /** The cancelling key's name. */
  by: string;
  reason: string | null;
}

/** What a claim changed: the claim, and for a stalled run taken over, the run and its `run.reclaimed` event. */
export interface Claimed {
  claim: RunClaim;
  run?: Run;
  event?: RunEvent;
}

/** A step the server wrote: the run after it, its event, and the claim it ended (null: there was no holder). */
export interface RunStepped {
  run: Run;
  event: RunEvent;
  claim: RunClaim | null;
}

/** Tries of a claim whose run or claim row kept moving under it. */
const MAX_ATTEMPTS = 16;

export function createClaims(deps: StoreDeps, { idempotency, steps }: { idempotency: Idempotency; steps: Steps }) {
  const { doc, tableName, now } = deps;

  /** @throws RunNotFound, RunHeld, StatusConflict (a finished run) */
  async function claimOnce(input: ClaimRun, idem?: (result: Claimed) => TransactItem): Promise<Claimed> {
    const { tenant, runId } = input;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const found = await steps.head(tenant, runId);
      if (!found) throw new RunNotFound(runId);
      const run = toRun(found.meta);
      const at = now().getTime();
      if (isTerminal(run.status)) throw new StatusConflict(runId, 'RUNNING', run.status, run.version, undefined, 'unfinished');
      const claim = takeClaim(found.claim, input, at);
      if (run.status === 'STALLED') {
        // Taken over: RUNNING again, with the takeover in the timeline, in the same transaction as the claim.
        const previous = found.claim;
        try {
          const result = await steps.step(
            tenant,
            runId,
            (head) => {
              if (head.run.status !== 'STALLED' || head.run.version !== run.version) throw new Retry();
              return {
                to: 'RUNNING',
                type: 'run.reclaimed',
                payload: {
                  from: previous ? { holder: previous.holder, token: previous.token } : null,
                  to: { holder: claim.holder, token: claim.token },
                },
                also: () => [claimPut(tableName, tenant, claim, previous)],
                refusal: () => new Retry(),
                extra: claim,
              };
            },
            idem && ((r) => idem({ claim: r.extra, run: r.run, event: r.event })),
          );
          return { claim: result.extra, run: result.run, event: result.event };
        } catch (err) {
          if (err instanceof Retry) continue;
          throw err;
        }
      }
      try {
        await write(
          deps,
          [
            // The run is still in the status read (a finished run takes no claim).
            statusStill(tableName, tenant, runId, run.status),
            // The claim row is still as read: of two claimers, one wins.
            claimPut(tableName, tenant, claim, found.claim, stallable.has(run.status) || run.status === 'AWAITING_APPROVAL'),
          ],
          idem?.({ claim }),
          { operation: 'claim' },
        );
        return { claim };
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        // The run or its claim moved since the read: decide again.
      }
    }
    // Still moving after every try: held by another worker is a refusal; anything else (claims
    // of this very holder racing each other, say) is contention, to retry.
    const found = await steps.head(tenant, runId);
    const live = claimLiveAt(found?.claim ?? null, now().getTime());
    if (live && live.holder !== input.holder) throw new RunHeld(live);
    throw new Contention(`the claim on run ${runId} kept changing under this claim; retry`);
  }

  /** Renews or releases the holder's claim. @throws ClaimLost */
  async function holderWrite(input: HolderCommand & { ttlSeconds?: number }, renewing: boolean): Promise<RunClaim> {
    const at = now().getTime();
    const until = renewing ? at + (input.ttlSeconds ?? 0) * 1000 : at;
    try {
      const row = await write(deps, [holderUpdate(tableName, input.tenant, input, until, at, renewing)], undefined, { operation: 'claim' });
      const claim = toClaim(row);
      if (!claim) throw new Error(`run ${input.runId}: the claim was written but returned no row`);
      return claim;
    } catch (err) {
      if (!(err instanceof ConditionFailed)) throw err;
      // Decided as the domain says, on the row the refusal found.
      const found = toClaim(err.item);
      if (renewing) renewClaim(found, { ...input, ttlSeconds: input.ttlSeconds ?? 0 }, at);
      else releaseClaim(found, input, at);
      throw new ClaimLost(input.runId, found, at, input.token);
    }
  }

  return {
    /**
     * Takes the run for `holder`: free, its claim ran out, or already `holder`'s (a new token
     * each time). A STALLED run is taken over: RUNNING again, with a `run.reclaimed` event.
     * @throws RunHeld, RunNotFound, StatusConflict (finished), IdempotencyConflict
     */
    async claim(input: ClaimRun, idem?: IdempotencyKey): Promise<Claimed> {
      if (!idem) return claimOnce(input);
      return idempotency.once<Claimed>(idem, {
        perform: (claim) => claimOnce(input, claim),
        encode: (claimed) => claimed,
        decode: storedResult<Claimed>,
      });
    },

    /** @throws ClaimLost unless `holder` holds the run with `token` and the claim has not run out */
    renew: (input: HolderCommand & { ttlSeconds: number }) => holderWrite(input, true),

    /** Ends the holder's live claim now (the run is free at once; the token is kept). @throws ClaimLost (also once it ran out) */
    release: (input: HolderCommand) => holderWrite(input, false),

    /**
     * Moves any unfinished run to CANCELLED with a `run.cancelled` event (who, why, from what),
     * and ends its claim, in one transaction: the holder's next fenced write is refused.
     * @throws StatusConflict (already finished), RunNotFound, IdempotencyConflict
     */
    async cancel(input: CancelRun, idem?: IdempotencyKey): Promise<RunStepped> {
      const once = (claim?: (result: StepResult<RunClaim | null>) => TransactItem) =>
        steps.step<RunClaim | null>(
          input.tenant,
          input.runId,
          ({ run, claim: held, at }) => {
            if (isTerminal(run.status)) throw new StatusConflict(input.runId, 'RUNNING', run.status, run.version, undefined, 'unfinished');
            const live = claimLiveAt(held, at);
            return {
              to: 'CANCELLED',
              type: 'run.cancelled',
              payload: {
                by: input.by,
                reason: input.reason,
                from: run.status,
                holder: live ? { holder: live.holder, token: live.token } : null,
              },
              // Only while the claim is the one read: a claim taken meanwhile is decided on again (and recorded).
              also: (expires) => [claimEnd(tableName, input.tenant, input.runId, at, { expires, seen: held, why: 'CANCELLED' })],
              extra: held
                ? {
                    ...held,
                    expiresAt: new Date(Math.min(at, held.expiresAt.getTime())),
                    version: held.version + 1,
                    ended: true,
                    endedBy: 'CANCELLED',
                  }
                : null,
            };
          },
          claim,
        );
      const stepped = async (claim?: (result: StepResult<RunClaim | null>) => TransactItem) => {
        const { run, event, extra } = await once(claim);
        return { run, event, claim: extra };
      };
      if (!idem) return stepped();
      return idempotency.once<RunStepped>(idem, {
        perform: (claim) => stepped(claim && ((r) => claim({ run: r.run, event: r.event, claim: r.extra }))),
        encode: (result) => result,
        decode: storedResult<RunStepped>,
      });
    },

    /** Claims that ran out by `atMs`, oldest first, from both ends of the stall index (stall-index.ts). */
    expired: (atMs: number, perEnd: number) => readExpiredClaims(deps, atMs, perEnd),

    /** Takes a claim out of the stall index (its run finished or is gone), unless it changed since it was read. */
    async unlist(tenant: string, runId: string, claim: RunClaim) {
      await doc.send(new UpdateCommand(claimUnlisting(tableName, tenant, runId, claim))).catch((err) => {
        if ((err as Error).name !== 'ConditionalCheckFailedException') throw err;
      });
    },

    /**
     * Takes the expired claim of a run that cannot stall now (awaiting approval) out of the stall
     * index while the run is still in `status`: left there, such claims would fill the watcher's
     * every page ahead of the newer ones. Approving the run lists its claim again (approval.ts).
     */
    async unlistWhile(tenant: string, runId: string, claim: RunClaim, status: RunStatus) {
      try {
        await write(
          deps,
          [statusStill(tableName, tenant, runId, status), { Update: claimUnlisting(tableName, tenant, runId, claim) }],
          undefined,
          { operation: 'claim' },
        );
      } catch (err) {
        // The run or its claim moved since the watcher read them: they are looked at again.
        if (!(err instanceof ConditionFailed)) throw err;
      }
    },

    /**
     * The stall watcher's step: a RUNNING or WAITING_FOR_TOOL run whose claim (this very one,
     * still unrenewed) ran out becomes STALLED, with a `run.stalled` event; its claim leaves the
     * stall index. Undefined when there is nothing to do (renewed, taken over, finished).
     */
    async stall(tenant: string, runId: string, expired: RunClaim): Promise<RunStepped | undefined> {
      try {
        const { run, event, extra } = await steps.step(tenant, runId, ({ run, claim, at }) => {
          const same = claim && claim.token === expired.token && claim.version === expired.version;
          // An ended claim (released, finished) ran out by its holder's own doing: no worker went missing.
          if (!same || claim.ended || claimLiveAt(claim, at) || !stallable.has(run.status)) throw new NothingToDo();
          const left: RunClaim = { ...claim, version: claim.version + 1, ended: true, endedBy: 'STALLED' };
          return {
            to: 'STALLED',
            type: 'run.stalled',
            payload: { holder: claim.holder, token: claim.token, expiredAt: claim.expiresAt.toISOString() },
            // Conditioned on the claim still being the expired one: a renewal or takeover in between
            // wins. It leaves the stall index: one run.stalled per expired claim.
            also: () => [claimPut(tableName, tenant, left, claim, false)],
            refusal: () => new NothingToDo(),
            extra: left,
          };
        });
        return { run, event, claim: extra };
      } catch (err) {
        if (err instanceof NothingToDo) return undefined;
        throw err;
      }
    },
  };
}

export type Claims = ReturnType<typeof createClaims>;

/** The run moved between the read and the write: decide again. */
class Retry extends Error {}
/** The watcher's candidate needs nothing (any more). */
class NothingToDo extends Error {}
