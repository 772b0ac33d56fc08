/**
 * The TTL sweeper: reads the due part of each table's expiry index, in bounded batches, and
 * deletes those items as DynamoDB's service would (a REMOVE marked as its own). Its cost
 * follows what expires, not the table's size.
 */
import type { MainDb } from '../dynalite.ts';
import { EngineError, isConditionalFailure } from '../errors.ts';
import type { ItemWriteOperation } from '../items.ts';
import { type IndexEntry, indexBound, indexKey } from './expiry-index.ts';
import type { TtlSettings } from './settings.ts';

/** Due index entries read per batch; a sweep goes on, batch after batch, until none is due. */
export const SWEEP_BATCH = 100;
/** DynamoDB leaves alone items whose expiry lies more than five years in the past. */
const FIVE_YEARS_MS = 5 * 365 * 24 * 3600 * 1000;

export type Write = (operation: ItemWriteOperation, body: Record<string, unknown>, options: { byTtl: boolean }) => Promise<unknown>;

export interface SweeperOptions {
  db: MainDb;
  settings: TtlSettings;
  write: Write;
  now: () => number;
  /** How long after its expiry an item is deleted at the earliest. */
  deleteDelayMs: number;
}

export function createSweeper({ db, settings, write, now, deleteDelayMs }: SweeperOptions) {
  let itemsTouched = 0;
  let itemsDeleted = 0;

  /**
   * Deletes one due item if its expiry is still the one indexed: 'done' (deleted, or its entry
   * stale), 'busy' (a write held the item past the lock wait: left for the next sweep), or
   * 'gone' when its table is.
   */
  async function expire(table: string, attributeName: string, entry: IndexEntry): Promise<'done' | 'busy' | 'gone'> {
    itemsTouched++;
    try {
      await write(
        'DeleteItem',
        {
          TableName: table,
          Key: entry.key,
          // Only if the expiry is still the one indexed: a renewal in between keeps the item.
          ConditionExpression: '#expiry = :expiry',
          ExpressionAttributeNames: { '#expiry': attributeName },
          ExpressionAttributeValues: { ':expiry': entry.expiry },
        },
        { byTtl: true },
      );
      itemsDeleted++;
      return 'done';
    } catch (err) {
      if (err instanceof EngineError && err.code === 'ResourceNotFoundException') return 'gone';
      if (err instanceof EngineError && err.code === 'TransactionConflictException') return 'busy';
      if (!isConditionalFailure(err)) throw err;
      // Renewed or gone since it was indexed: the entry is stale (its writer removed it, or raced an indexing batch).
      await db.batch([{ type: 'del', key: indexKey(table, entry.expiresAt, entry.itemKey) }]);
      return 'done';
    }
  }

  /** Deletes every item of the table due now; resolves to how many. */
  async function sweepTable(table: string, attributeName: string) {
    const before = itemsDeleted;
    const at = now();
    const lt = indexBound(table, at - deleteDelayMs + 1);
    // Past the entries left for the next sweep (a batch of them alone would be read again and again).
    let after: string | undefined;
    for (let full = true; full; ) {
      const range = after === undefined ? { gte: indexBound(table, at - FIVE_YEARS_MS), lt } : { gt: after, lt };
      const due: IndexEntry[] = [];
      for await (const value of db.values({ ...range, limit: SWEEP_BATCH })) due.push(value as IndexEntry);
      for (const entry of due) {
        const outcome = await expire(table, attributeName, entry);
        if (outcome === 'gone') return itemsDeleted - before;
        if (outcome === 'busy') after = indexKey(table, entry.expiresAt, entry.itemKey);
      }
      full = due.length === SWEEP_BATCH;
    }
    return itemsDeleted - before;
  }

  return {
    /** Deletes the due items of every table with TTL on; resolves to how many. */
    async sweep() {
      let deleted = 0;
      for (const [table, setting] of settings.entries()) {
        if (setting.enabled) deleted += await sweepTable(table, setting.attributeName);
      }
      return deleted;
    },
    stats: () => ({ itemsTouched, itemsDeleted }),
  };
}
