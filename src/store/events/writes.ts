/**
 * The event writes: a put conditioned on its seq being free, alone (with its cost charged in
 * the same transaction, after an idempotency claim) or as a batch at consecutive seqs.
 */
import { randomUUID } from 'node:crypto';
import { ClaimLost, InvalidInput } from '../../domain/errors.ts';
import type { RunEvent } from '../../domain/run.ts';
import { attr, eventItem, toClaim } from '../../table/codec.ts';
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

function eventPut(tableName: string, tenant: string, event: RunEvent, writeId: string): Write {
  // A seq is taken once: two writers can never both have it.
  return { Put: { TableName: tableName, Item: eventItem(tenant, event, writeId), ConditionExpression: conditions.absent } };
}

/** The fencing write of an append, when it carries a claim's token: the run's claim must be that token's, and live. */
const fenceOf = (tableName: string, tenant: string, event: RunEvent, token: number | undefined) =>
  token === undefined ? [] : [fence(tableName, tenant, event.runId, token, event.createdAt.getTime())];

/**
 * Writes the event if its seq is free (with its cost, after a claim, fenced by a claim's
 * token); false if another writer has it.
 * @throws BudgetExceeded or RunNotFound when the cost's charge is refused (nothing is written)
 * @throws ClaimLost when fenced by a token that is not the run's live claim (nothing is written)
 * @throws InvalidInput when the event is too large for one item
 */
export async function putEvent(
  { doc, tableName }: StoreDeps,
  tenant: string,
  event: RunEvent,
  cost: number | undefined,
  claim?: TransactItem,
  fencingToken?: number,
) {
  const writeId = randomUUID();
  const charge = { tenant, runId: event.runId, amount: cost ?? 0 };
  const writes: Write[] = [eventPut(tableName, tenant, event, writeId)];
  if (cost !== undefined) writes.push({ Update: chargeUpdate(tableName, charge, event.createdAt, writeId) });
  writes.push(...fenceOf(tableName, tenant, event, fencingToken));
  try {
    await write(doc, writes, claim);
    return true;
  } catch (err) {
    if (isItemTooLarge(err)) throw new InvalidInput('input.payload', 'is too large to store in one DynamoDB item (400 KB)');
    if (!(err instanceof ConditionFailed)) throw err;
    if (fencingToken !== undefined && err.index === writes.length - 1)
      throw new ClaimLost(event.runId, toClaim(err.item), event.createdAt.getTime());
    if (err.index === 1) throw chargeRefusal(charge, err.item);
    // Taken, unless the SDK resent our own put after a lost response: then the seq is ours.
    return err.item?.[attr.writeId] === writeId;
  }
}

/**
 * Writes events at consecutive seqs in one transaction (fenced once for all of them): all of
 * them, or none if any seq is taken (then false).
 * @throws ClaimLost when fenced by a token that is not the run's live claim
 */
export async function putBatch({ doc, tableName }: StoreDeps, tenant: string, events: RunEvent[], fencingToken?: number) {
  const first = events[0] as RunEvent;
  try {
    await write(doc, [
      ...events.map((event) => eventPut(tableName, tenant, event, randomUUID())),
      ...fenceOf(tableName, tenant, first, fencingToken),
    ]);
    return true;
  } catch (err) {
    if (!(err instanceof ConditionFailed)) throw err;
    if (err.index === events.length) throw new ClaimLost(first.runId, toClaim(err.item), first.createdAt.getTime());
    return false;
  }
}
