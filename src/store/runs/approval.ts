/**
 * Approvals: a status change and the event that records it, in ONE transaction, so the
 * timeline never shows a decision the status does not (or the other way round). The run is
 * read first and written only if still at that version: the result is known before the
 * write, which an idempotency claim in the same transaction stores.
 */
import { randomUUID } from 'node:crypto';
import { Contention, RunNotFound, StatusConflict } from '../../domain/errors.ts';
import { isTerminal, type Run, type RunEvent, type RunStatus } from '../../domain/run.ts';
import { eventItem, toRun } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { ConditionFailed, type TransactItem, type Write, write } from '../write.ts';
import type { RunReads } from './read.ts';
import { budgetExpiry, metaUpdate } from './transition.ts';

/** Tries before giving up while other writers keep taking the next seq or changing the run. */
const MAX_ATTEMPTS = 16;

export interface ApprovalStep {
  tenant: string;
  runId: string;
  from: RunStatus;
  to: RunStatus;
  expectedVersion?: number;
  /** The event recorded with the change. */
  type: string;
  payload: unknown;
}

export interface ApprovalResult {
  run: Run;
  event: RunEvent;
}

interface ApprovalDeps {
  reads: RunReads;
  idempotency: Idempotency;
  lastSeq: (tenant: string, runId: string) => Promise<number>;
  onFinished: (tenant: string, runId: string, expires: number) => void;
}

export function createApprovals(deps: StoreDeps, { reads, idempotency, lastSeq, onFinished }: ApprovalDeps) {
  const { doc, tableName, now, retention } = deps;

  /** @throws StatusConflict, RunNotFound, Contention */
  async function step(input: ApprovalStep, claim?: (result: ApprovalResult) => TransactItem): Promise<ApprovalResult> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const row = await reads.meta(input.tenant, input.runId);
      if (!row) throw new RunNotFound(input.runId);
      const current = toRun(row);
      const versionWrong = input.expectedVersion !== undefined && input.expectedVersion !== current.version;
      if (current.status !== input.from || versionWrong)
        throw new StatusConflict(input.runId, input.from, current.status, current.version, input.expectedVersion);
      const at = now();
      const seq = (await lastSeq(input.tenant, input.runId)) + 1;
      const event: RunEvent = { runId: input.runId, seq, type: input.type, payload: input.payload, createdAt: at };
      const run: Run = { ...current, status: input.to, version: current.version + 1, updatedAt: at };
      const expires = isTerminal(input.to) ? Math.floor(at.getTime() / 1000) + retention.finishedRunSeconds : undefined;
      const writeId = randomUUID();
      const writes: Write[] = [
        // Still in `from` at the version read: the decision was made on the run as it is.
        metaUpdate(tableName, { ...input, expectedVersion: current.version }, at, writeId, expires),
        // The seq is free: the approval's event takes the next place in the timeline.
        { Put: { TableName: tableName, Item: eventItem(input.tenant, event, writeId), ConditionExpression: conditions.absent } },
      ];
      if (expires !== undefined) writes.push(budgetExpiry(tableName, input, expires));
      try {
        await write(doc, writes, claim?.({ run, event }));
        if (expires !== undefined) onFinished(input.tenant, input.runId, expires);
        return { run, event };
      } catch (err) {
        // The run changed or the seq was taken since the read: decide again on what is there now.
        if (!(err instanceof ConditionFailed)) throw err;
      }
    }
    throw new Contention(`run ${input.runId} kept changing under this approval; retry`);
  }

  return {
    /**
     * Moves the run from `from` to `to` and appends the event, together, at most once per key.
     * @throws StatusConflict when the run is not in `from` (or not at expectedVersion)
     * @throws RunNotFound
     * @throws IdempotencyConflict when the key was used for another request
     */
    async decide(input: ApprovalStep, idem?: IdempotencyKey): Promise<ApprovalResult> {
      if (!idem) return step(input);
      return idempotency.once<ApprovalResult>(idem, {
        perform: (claim) => step(input, claim),
        encode: (result) => result,
        decode: (stored) => {
          const { run, event } = stored as { run: Run & { createdAt: string; updatedAt: string }; event: RunEvent & { createdAt: string } };
          return {
            run: { ...run, createdAt: new Date(run.createdAt), updatedAt: new Date(run.updatedAt) },
            event: { ...event, createdAt: new Date(event.createdAt) },
          };
        },
      });
    },
  };
}

export type Approvals = ReturnType<typeof createApprovals>;
