/** Runs: created with their budget in one transaction, read with budget and first events in one Query. */
import { randomUUID } from 'node:crypto';
import { QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { RunAlreadyExists, RunNotFound, StatusConflict } from '../domain/errors.ts';
import { type Budget, initialStatus, type Run, type RunEvent, type RunStatus } from '../domain/run.ts';
import { attr, budgetItem, runItem, toBudget, toEvent, toRun } from '../table/codec.ts';
import { cancellations, conditions, isConditionalCheckFailed, isTransactionCanceled, oldItem } from '../table/conditions.ts';
import { keys, RUN_BUDGET_SK, RUN_META_SK } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';
import { retryConflicts } from './retry.ts';

export interface CreateRun {
  tenant: string;
  id: string;
  task: string;
  budgetCap: number;
}

/** A run as one Query on its partition finds it. */
export interface RunSnapshot {
  run: Run;
  budget: Budget | null;
  /** The run's first events, in seq order. */
  events: RunEvent[];
  /** Whether the run has more events than `events`. */
  moreEvents: boolean;
}

export interface Transition {
  tenant: string;
  runId: string;
  from: RunStatus;
  to: RunStatus;
}

export function createRunStore({ doc, tableName, now }: StoreDeps) {
  return {
    /**
     * Creates the run's metadata and budget together, or neither.
     * @throws RunAlreadyExists
     */
    async create({ tenant, id, task, budgetCap }: CreateRun): Promise<{ run: Run; budget: Budget }> {
      const at = now();
      const run: Run = { id, task, status: initialStatus, version: 1, createdAt: at, updatedAt: at };
      const budget: Budget = { runId: id, cap: budgetCap, spent: 0, remaining: budgetCap, version: 1 };
      try {
        // The SDK resends a transaction with the same ClientRequestToken: it is applied once.
        const items = [
          // A run id is taken once; its budget row comes with it.
          { Put: { TableName: tableName, Item: runItem(tenant, run), ConditionExpression: conditions.absent } },
          { Put: { TableName: tableName, Item: budgetItem(tenant, budget, at), ConditionExpression: conditions.absent } },
        ];
        await retryConflicts(() => doc.send(new TransactWriteCommand({ TransactItems: items })));
      } catch (err) {
        if (isTransactionCanceled(err) && cancellations(err).some((c) => c.conditionFailed)) throw new RunAlreadyExists(id);
        throw err;
      }
      return { run, budget };
    },

    /** Metadata, budget and up to `eventLimit` first events, from ONE Query; null when the run does not exist. */
    async read(tenant: string, runId: string, { consistent = false, eventLimit }: { consistent?: boolean; eventLimit: number }) {
      const { Items = [], LastEvaluatedKey } = await doc.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId) },
          ConsistentRead: consistent,
          // Budget and metadata sort first; one more event than asked tells whether more follow.
          Limit: 2 + eventLimit + 1,
        }),
      );
      const meta = Items.find((item) => item.sk === RUN_META_SK);
      if (!meta) return null;
      const budget = Items.find((item) => item.sk === RUN_BUDGET_SK);
      const events = Items.filter((item) => item.sk !== RUN_META_SK && item.sk !== RUN_BUDGET_SK).map(toEvent);
      return {
        run: toRun(meta),
        budget: budget ? toBudget(budget) : null,
        events: events.slice(0, eventLimit),
        // A page stops at 1 MB too: then more may follow even with fewer events than asked.
        moreEvents: events.length > eventLimit || LastEvaluatedKey !== undefined,
      } satisfies RunSnapshot;
    },

    /**
     * Moves the run from `from` to `to` (the caller checked the transition is legal).
     * @throws StatusConflict when the run is no longer in `from`
     * @throws RunNotFound
     */
    async transition({ tenant, runId, from, to }: Transition): Promise<Run> {
      const writeId = randomUUID();
      const update = {
        TableName: tableName,
        Key: keys.run(tenant, runId),
        // The run exists and is still where the caller saw it.
        ConditionExpression: `${conditions.present} AND ${conditions.statusIs}`,
        UpdateExpression: 'SET #status = :to, #updatedAt = :now, gsi2pk = :listing, #writeId = :writeId ADD #version :one',
        ExpressionAttributeNames: {
          '#status': attr.status,
          '#updatedAt': attr.updatedAt,
          '#version': attr.version,
          '#writeId': attr.writeId,
        },
        ExpressionAttributeValues: {
          ':from': from,
          ':to': to,
          ':now': now().toISOString(),
          ':listing': keys.runListing(tenant, runId, to, '').gsi2pk,
          ':one': 1,
          ':writeId': writeId,
        },
        ReturnValues: 'ALL_NEW',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      } as const;
      try {
        const { Attributes } = await retryConflicts(() => doc.send(new UpdateCommand(update)));
        return toRun(Attributes ?? {});
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        const found = oldItem(err);
        if (!found) throw new RunNotFound(runId);
        // The SDK resent this transition after a lost response: it was applied.
        if (found[attr.writeId] === writeId) return toRun(found);
        throw new StatusConflict(runId, from, toRun(found).status);
      }
    },
  };
}

export type RunStore = ReturnType<typeof createRunStore>;
