/**
 * One conditional write, alone or in a transaction after an idempotency claim. Either
 * way, a failed condition comes back as ConditionFailed carrying the item the write found
 * (ReturnValuesOnConditionCheckFailure), for the store to turn into its domain refusal.
 *
 * Every write is published as it lands: each row it wrote that subscribers watch goes out as
 * its change (table/changes.ts, the decoding the stream's records go through too), at once,
 * before the stream brings it. A put's row is known; an update alone returns its row; the rows
 * a transaction updated are read back (one strongly consistent BatchGet) and published then.
 */
import { randomUUID } from 'node:crypto';
import { BatchGetCommand, PutCommand, TransactWriteCommand, type TransactWriteCommandInput, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type Backoff, delayFor, sleep } from '../lib/backoff.ts';
import type { Item } from '../table/attributes.ts';
import { changeOfRow, isWatched } from '../table/changes.ts';
import { cancellations, isConditionalCheckFailed, isTransactionCanceled, oldItem } from '../table/conditions.ts';
import { isThrottle, isTransactionConflict } from '../table/failures.ts';
import type { StoreDeps } from './deps.ts';
import { ClaimTaken } from './idempotency.ts';
import { markRetriedOut, type Operation, THROTTLE_RETRY, throttleDelay } from './throttles.ts';

export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
type Put = NonNullable<TransactItem['Put']>;
type Update = NonNullable<TransactItem['Update']>;
type Check = NonNullable<TransactItem['ConditionCheck']>;

/** A write of the transaction, or a condition another row must meet for it to land (a claim's fencing token, say). */
export type Write = { Put: Put } | { Update: Update } | { ConditionCheck: Check };

export class ConditionFailed extends Error {
  constructor(
    /** Which of the writes failed first (0 for a single write). */
    readonly index: number,
    /** The item the write found, if there was one. */
    readonly item: Item | undefined,
    /** Every write of a transaction whose condition failed, with the item it found. */
    private readonly all: ReadonlyMap<number, Item | undefined> = new Map([[index, item]]),
  ) {
    super('condition failed');
  }

  /** Whether write `index` failed its condition too (a fence, say, beside a charge refused), and what it found. */
  failedAt(index: number): { item: Item | undefined } | undefined {
    return this.all.has(index) ? { item: this.all.get(index) } : undefined;
  }

  /** Whether write `index` failed for want of its row (the run, say, does not exist). */
  missingAt(index: number): boolean {
    return this.all.has(index) && this.all.get(index) === undefined;
  }
}

/** What a write needs: the table's client, where the changes it made go, where its throttles are counted. */
type WriteDeps = Pick<StoreDeps, 'doc' | 'publish' | 'throttles' | 'throttleRetry'>;

/** What the write is (its throttles are counted under it), and how often a throttled one is tried. */
export interface WriteHow {
  operation?: Operation;
  /** Tries when throttled (default the store's throttleRetry; 1: the caller backs off itself, as group commit does to shrink its batch). */
  throttleAttempts?: number;
}

/** Tries of a write that other transactions kept holding, before the conflict reaches the caller. */
const CONFLICT_ATTEMPTS = 6;
/** Growing (20, 40, ... 320 ms at most) and jittered, so that the writers in conflict do not meet again. */
const CONFLICT_BACKOFF: Backoff = { firstMs: 20, maxMs: 320, jitter: 'full' };

/**
 * Sends a write again while it is refused for reasons that prove nothing was applied: another
 * transaction held the item at that moment (TransactionConflict; usually wins at once), or its
 * partition was past its throughput (a throttle; waits grow with each one, jittered).
 */
async function retrying<T>(deps: WriteDeps, how: WriteHow, send: () => Promise<T>): Promise<T> {
  const operation = how.operation ?? 'write';
  const retry = deps.throttleRetry ?? THROTTLE_RETRY;
  const throttleAttempts = how.throttleAttempts ?? retry.attempts;
  let conflicts = 0;
  let throttles = 0;
  for (;;) {
    try {
      return await send();
    } catch (err) {
      if (isTransactionConflict(err) && ++conflicts < CONFLICT_ATTEMPTS) {
        await sleep(delayFor(CONFLICT_BACKOFF, conflicts - 1));
        continue;
      }
      if (!isThrottle(err)) throw err;
      deps.throttles?.count(operation);
      if (++throttles >= throttleAttempts) {
        if (how.throttleAttempts === undefined) {
          deps.throttles?.gaveUp(operation);
          markRetriedOut(err);
        }
        throw err;
      }
      await sleep(throttleDelay(retry, throttles - 1));
    }
  }
}

/**
 * @returns the item after the write (updates alone); undefined in a transaction
 * @throws ConditionFailed, or ClaimTaken when the idempotency claim lost
 */
export async function write(deps: WriteDeps, writes: Write[], claim?: TransactItem, how: WriteHow = {}): Promise<Item | undefined> {
  const resend = <T>(send: () => Promise<T>) => retrying(deps, how, send);
  const doc = deps.doc as unknown as { send: (command: never) => Promise<unknown> };
  const failOnOld = <W extends Put | Update | Check>(w: W) => ({ ...w, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const });
  const only = writes[0];
  if (!claim && writes.length === 1 && only && !('ConditionCheck' in only)) {
    try {
      if ('Put' in only) {
        await resend(() => doc.send(new PutCommand(failOnOld(only.Put)) as never));
        publishRows(deps, [only.Put.Item as Item]);
        return undefined;
      }
      const result = (await resend(() => doc.send(new UpdateCommand({ ...failOnOld(only.Update), ReturnValues: 'ALL_NEW' }) as never))) as {
        Attributes?: Item;
      };
      if (result.Attributes) publishRows(deps, [result.Attributes]);
      return result.Attributes;
    } catch (err) {
      if (isConditionalCheckFailed(err)) throw new ConditionFailed(0, oldItem(err));
      throw err;
    }
  }
  const items: TransactItem[] = [
    ...(claim ? [claim] : []),
    ...writes.map((w) =>
      'Put' in w
        ? { Put: failOnOld(w.Put) }
        : 'Update' in w
          ? { Update: failOnOld(w.Update) }
          : { ConditionCheck: failOnOld(w.ConditionCheck) },
    ),
  ];
  try {
    // Every send of this transaction (the SDK's retries and ours) carries one ClientRequestToken:
    // a resend of one that landed with its answer lost is not applied again.
    const ClientRequestToken = randomUUID();
    await resend(() => doc.send(new TransactWriteCommand({ TransactItems: items, ClientRequestToken }) as never));
    publishTransaction(deps, writes);
    return undefined;
  } catch (err) {
    if (!isTransactionCanceled(err)) throw err;
    const reasons = cancellations(err);
    const offset = claim ? 1 : 0;
    if (claim && reasons[0]?.conditionFailed) throw new ClaimTaken('idempotency key claimed by another request');
    const all = new Map<number, Item | undefined>();
    reasons.forEach((r, i) => {
      if (i >= offset && r.conditionFailed) all.set(i - offset, r.item);
    });
    const [first] = all;
    if (first) throw new ConditionFailed(first[0], first[1], all);
    throw err;
  }
}

/** Publishes the changes of rows just written. */
function publishRows({ publish }: WriteDeps, rows: Item[]) {
  if (!publish) return;
  for (const row of rows) {
    const change = changeOfRow(row);
    if (change) publish(change);
  }
}

/** A transaction's puts at once, the watched rows it updated once read back (they are not returned). */
function publishTransaction(deps: WriteDeps, writes: Write[]) {
  if (!deps.publish) return;
  const puts: Item[] = [];
  const updated: { TableName: string; Key: Item }[] = [];
  for (const w of writes) {
    if ('Put' in w) puts.push(w.Put.Item as Item);
    else if ('Update' in w && isWatched(String(w.Update.Key?.pk), String(w.Update.Key?.sk)))
      updated.push({ TableName: w.Update.TableName as string, Key: w.Update.Key as Item });
  }
  publishRows(deps, puts);
  if (updated.length > 0) void readBack(deps, updated);
}

async function readBack(deps: WriteDeps, updated: { TableName: string; Key: Item }[]) {
  const tableName = (updated[0] as { TableName: string }).TableName;
  try {
    const { Responses } = await deps.doc.send(
      new BatchGetCommand({ RequestItems: { [tableName]: { Keys: updated.map((u) => u.Key), ConsistentRead: true } } }),
    );
    publishRows(deps, (Responses?.[tableName] ?? []) as Item[]);
  } catch {
    // Published late, not lost: the stream brings the same rows a moment later.
  }
}

/**
 * The row an update alone left (it is sent with ReturnValues ALL_NEW, so an applied update
 * always has one): never an empty row standing in for it.
 */
export function rowAfter(item: Item | undefined, what: string): Item {
  if (!item) throw new Error(`${what}: the update was applied but returned no row`);
  return item;
}
