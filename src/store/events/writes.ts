/**
 * The event writes: a put conditioned on its seq being free, alone (with its cost charged in
 * the same transaction, after an idempotency claim) or as a batch at consecutive seqs.
 */
import { randomUUID } from 'node:crypto';
import { ClaimLost, InvalidInput } from '../../domain/errors.ts';
import type { RunEvent } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { eventItem, toClaim } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { chargeRefusal, chargeUpdate } from '../budgets.ts';
import type { StoreDeps } from '../deps.ts';
import { fence } from '../runs/claim-writes.ts';
import { ConditionFailed, type TransactItem, type Write, write } from '../write.ts';

/** Collisions tolerated before an append gives up (each one means another writer won a seq). */
export const MAX_APPEND_ATTEMPTS = 256;

/** For /metrics: appends written, seqs found taken (conditional-check failures), batches of more than one. */
export interface AppendCounters {
  appends: number;
  conflicts: number;
  batches: number;
}

const isItemTooLarge = (err: unknown) => (err as Error)?.name === 'ValidationException' && /Item size/.test((err as Error).message);

function eventPut(tableName: string, tenant: string, event: RunEvent, writeId: string, shards: number): Write {
  // A seq is taken once: two writers can never both have it (it has one home among the shards).
  return { Put: { TableName: tableName, Item: eventItem(tenant, event, writeId, shards), ConditionExpression: conditions.absent } };
}

/**
 * The fencing write of an append, when it carries a claim's token: the run's claim must be that
 * token's, and live now, as the write is sent (not when its events were queued: a batch may
 * be written a while after its first append came).
 */
const fenceOf = (tableName: string, tenant: string, runId: string, token: number | undefined, at: number) =>
  token === undefined ? [] : [fence(tableName, tenant, runId, token, at)];

/** What an append writes beside its events: a cost charged, an idempotency claim, a claim's fence. Only the first two need a lone event. */
export interface EventWriteOptions {
  cost?: number;
  claim?: TransactItem;
  fencingToken?: number;
  /** The run's event shard count (default 1). */
  shards?: number;
  /** Tries when throttled (1: group commit backs off itself, with a smaller batch). */
  throttleAttempts?: number;
}

/**
 * Writes events at their seqs, all or none, if every seq is free (with a lone event's cost and
 * idempotency claim in the same transaction; fenced once for all of them by a claim's token);
 * false if another writer has one of the seqs.
 * @throws BudgetExceeded or RunNotFound when the cost's charge is refused (nothing is written)
 * @throws ClaimLost when fenced by a token that is not the run's live claim (nothing is written)
 * @throws InvalidInput when an event is too large for one item
 */
export async function putEvents(deps: StoreDeps, tenant: string, events: RunEvent[], options: EventWriteOptions = {}) {
  const { tableName } = deps;
  const { cost, claim, fencingToken, shards = 1 } = options;
  const first = events[0] as RunEvent;
  if (events.length > 1 && (cost !== undefined || claim)) throw new Error('a cost or an idempotency claim goes with one event alone');
  const writeIds = events.map(() => randomUUID());
  const writes: Write[] = events.map((event, i) => eventPut(tableName, tenant, event, writeIds[i] as string, shards));
  const charge = { tenant, runId: first.runId, amount: cost ?? 0 };
  if (cost !== undefined) writes.push({ Update: chargeUpdate(tableName, charge, first.createdAt, writeIds[0] as string) });
  const sentAt = deps.now().getTime();
  writes.push(...fenceOf(tableName, tenant, first.runId, fencingToken, sentAt));
  try {
    await write(deps, writes, claim, { operation: 'append', throttleAttempts: options.throttleAttempts });
    return true;
  } catch (err) {
    if (isItemTooLarge(err)) throw new InvalidInput('input.payload', 'is too large to store in one DynamoDB item (400 KB)');
    if (!(err instanceof ConditionFailed)) throw err;
    // A superseded worker learns that first, whatever else its write met.
    const fenceFailed = fencingToken !== undefined ? err.failedAt(writes.length - 1) : undefined;
    if (fenceFailed) throw new ClaimLost(first.runId, toClaim(fenceFailed.item), sentAt, fencingToken);
    if (cost !== undefined && err.index === 1) throw chargeRefusal(charge, err.item);
    // Taken, unless the SDK resent our own put after a lost response: then the seq is ours.
    return events.length === 1 && err.item?.[attr.writeId] === writeIds[0];
  }
}
