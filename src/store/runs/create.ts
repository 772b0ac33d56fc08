/** Creating a run: its metadata and its budget row in one transaction, or neither. */
import { InvalidInput, RunAlreadyExists } from '../../domain/errors.ts';
import { MAX_EVENT_SHARDS } from '../../domain/limits.ts';
import { type Budget, initialStatus, type Run } from '../../domain/run.ts';
import type { Item } from '../../table/attributes.ts';
import { budgetItem, runItem } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, type TransactItem, type Write, write } from '../write.ts';

export interface CreateRun {
  tenant: string;
  id: string;
  task: string;
  budgetCap: number;
  /** Partition keys its events are spread over (default 1; at most MAX_EVENT_SHARDS). */
  eventShards?: number;
}

export interface RunCreated {
  run: Run;
  budget: Budget;
}

/** @throws RunAlreadyExists */
export async function createRun(
  deps: StoreDeps,
  { tenant, id, task, budgetCap, eventShards = 1 }: CreateRun,
  claim?: (result: RunCreated) => TransactItem,
): Promise<RunCreated> {
  const { tableName, now } = deps;
  if (!Number.isSafeInteger(eventShards) || eventShards < 1 || eventShards > MAX_EVENT_SHARDS)
    throw new InvalidInput('input.eventShards', `must be a whole number from 1 to ${MAX_EVENT_SHARDS}`);
  const at = now();
  const run: Run = { id, task, status: initialStatus, version: 1, createdAt: at, updatedAt: at, eventShards };
  const budget: Budget = { runId: id, cap: budgetCap, spent: 0, remaining: budgetCap, version: 1 };
  // A run id is taken once; its budget row comes with it. An expired run's id stays taken
  // until DynamoDB has deleted its rows: a new run must never see the old one's events.
  const put = (Item: Item): Write => ({ Put: { TableName: tableName, Item, ConditionExpression: conditions.absent } });
  try {
    await write(deps, [put(runItem(tenant, run)), put(budgetItem(tenant, budget, at))], claim?.({ run, budget }), { operation: 'create' });
  } catch (err) {
    if (err instanceof ConditionFailed) throw new RunAlreadyExists(id);
    throw err;
  }
  return { run, budget };
}
