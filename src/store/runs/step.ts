/**
 * A step of a run's life that the server writes itself: a status change and the event that
 * records it (and whatever else must change with them: a claim taken or ended, a budget's
 * TTL), in ONE transaction, so the timeline never shows a change the status does not (or the
 * other way round). The run's head (metadata and claim) is read first, the step decided on it,
 * and written only if the run is still at that version and the event's seq still free: the
 * result is known before the write, which an idempotency claim in the same transaction stores.
 */
import { randomUUID } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { Contention, RunNotFound } from '../../domain/errors.ts';
import { isTerminal, type Run, type RunClaim, type RunEvent, type RunStatus, type ServerEventType } from '../../domain/run.ts';
import type { Item } from '../../table/attributes.ts';
import { eventItem, toClaim, toRun } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { keys, RUN_CLAIM_SK, RUN_META_SK } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, type TransactItem, type Write, write } from '../write.ts';
import type { RunReads } from './read.ts';
import { budgetExpiry, metaUpdate } from './transition.ts';

/** Tries before giving up while other writers keep taking the next seq or changing the run. */
const MAX_ATTEMPTS = 16;

/** The run as a step decides on it. */
export interface RunHead {
  run: Run;
  /** Its claim row as stored (null: never claimed, or ended with no holder). */
  claim: RunClaim | null;
  /** The clock of this attempt (epoch ms). */
  at: number;
}

/** What a step does to the run it decided on. */
export interface StepPlan<Extra = undefined> {
  to: RunStatus;
  type: ServerEventType;
  payload: unknown;
  /** Other writes of the same transaction: `expires` is set when the run finishes with this step. */
  also?: (expires: number | undefined) => Write[];
  /**
   * The refusal when one of `also`'s writes failed (by its index there, with the row it found):
   * a fence that no longer holds, say. Undefined: decide again on the run as it now is.
   */
  refusal?: (index: number, found: Item | undefined) => Error | undefined;
  /** Something more the step hands back (the claim it took, say). */
  extra?: Extra;
}

export interface StepResult<Extra = undefined> {
  run: Run;
  event: RunEvent;
  extra: Extra;
}

export function createSteps(
  deps: StoreDeps,
  reads: RunReads,
  lastSeq: (tenant: string, runId: string, shards: number) => Promise<number>,
  onFinished: (tenant: string, runId: string, expires: number) => void,
  alone: <T>(tenant: string, runId: string, step: () => Promise<T>) => Promise<T> = (_tenant, _runId, step) => step(),
) {
  const { doc, tableName, now, retention } = deps;

  /** The run's metadata and claim, from one strongly consistent Query of its head rows. */
  async function head(tenant: string, runId: string): Promise<{ meta: Item; claim: RunClaim | null } | undefined> {
    const { Items = [] } = await doc.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
        ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId), ':from': '#', ':to': '#~' },
        ConsistentRead: true,
      }),
    );
    const meta = reads.live(Items.find((item) => item.sk === RUN_META_SK));
    return meta ? { meta, claim: toClaim(Items.find((item) => item.sk === RUN_CLAIM_SK)) } : undefined;
  }

  /** One try of a step: its result, or undefined when the run moved or the seq was taken since the read. */
  async function once<Extra>(
    tenant: string,
    runId: string,
    decide: (head: RunHead) => StepPlan<Extra>,
    claim?: (result: StepResult<Extra>) => TransactItem,
  ): Promise<StepResult<Extra> | undefined> {
    const found = await head(tenant, runId);
    if (!found) throw new RunNotFound(runId);
    const current = toRun(found.meta);
    const at = now();
    // Decided first: a step refused here never holds the run back from anyone.
    const plan = decide({ run: current, claim: found.claim, at: at.getTime() });
    // Its seq read and its write with the run to itself among this process's appends: one
    // landing in between would take the seq. (The write is conditioned on the version decided on.)
    return alone(tenant, runId, () => written(tenant, runId, current, at, plan, claim));
  }

  /** Writes a decided step at the run's next seq: its result, or undefined when the run moved or the seq was taken. */
  async function written<Extra>(
    tenant: string,
    runId: string,
    current: Run,
    at: Date,
    plan: StepPlan<Extra>,
    claim?: (result: StepResult<Extra>) => TransactItem,
  ): Promise<StepResult<Extra> | undefined> {
    const shards = current.eventShards;
    const seq = (await lastSeq(tenant, runId, shards)) + 1;
    const event: RunEvent = { runId, seq, type: plan.type, payload: plan.payload, createdAt: at, origin: 'SERVER' };
    const run: Run = { ...current, status: plan.to, version: current.version + 1, updatedAt: at };
    const expires = isTerminal(plan.to) ? Math.floor(at.getTime() / 1000) + retention.finishedRunSeconds : undefined;
    const writeId = randomUUID();
    const transition = { tenant, runId, from: current.status, to: plan.to, expectedVersion: current.version };
    const own: Write[] = [
      // Still where it was, at the version read: the step was decided on the run as it is.
      metaUpdate(tableName, transition, at, writeId, expires),
      // The seq is free: the step's event takes the next place in the timeline.
      { Put: { TableName: tableName, Item: eventItem(tenant, event, writeId, shards), ConditionExpression: conditions.absent } },
      ...(expires !== undefined ? [budgetExpiry(tableName, transition, expires)] : []),
    ];
    const writes = [...own, ...(plan.also?.(expires) ?? [])];
    const result = { run, event, extra: plan.extra as Extra };
    try {
      await write(deps, writes, claim?.(result), { operation: 'step' });
      if (expires !== undefined) onFinished(tenant, runId, expires);
      return result;
    } catch (err) {
      // The run changed or the seq was taken since the read: decide again on what is there now.
      if (!(err instanceof ConditionFailed)) throw err;
      const refused = err.index >= own.length ? plan.refusal?.(err.index - own.length, err.item) : undefined;
      if (refused) throw refused;
      return undefined;
    }
  }

  /**
   * Decides the step on the run as it is (`decide` throws the refusal), and writes it if the run
   * is still so. @throws RunNotFound, whatever `decide` throws, Contention
   */
  async function step<Extra = undefined>(
    tenant: string,
    runId: string,
    decide: (head: RunHead) => StepPlan<Extra>,
    claim?: (result: StepResult<Extra>) => TransactItem,
  ): Promise<StepResult<Extra>> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const result = await once(tenant, runId, decide, claim);
      if (result) return result;
    }
    throw new Contention(`run ${runId} kept changing under this change; retry`);
  }

  return { head, step };
}

export type Steps = ReturnType<typeof createSteps>;
