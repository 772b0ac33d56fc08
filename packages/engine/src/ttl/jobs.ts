/**
 * Keeping the expiry index whole when TTL is switched: enabling indexes the items written
 * before (in bounded batches, resumed after a restart), disabling and dropping the table
 * clear its entries. One job at a time per table, in the order they were asked for.
 */
import { dynaliteDb, getTable, type Item, keyOf, type LevelOp, levelKeys, type Store } from '../dynalite.ts';
import { indexOps, indexPrefix } from './expiry-index.ts';
import type { TtlSettings } from './settings.ts';

/** Items read per batch when indexing a table's earlier items (each may be up to 400 KB). */
const BACKFILL_BATCH = 100;
/** Index entries deleted per batch when clearing a table's index. */
const CLEAR_BATCH = 1_000;

export function createIndexJobs(store: Store, settings: TtlSettings, onError: (err: unknown) => void) {
  const { db } = store;
  const queues = new Map<string, Promise<void>>();
  let itemsIndexed = 0;
  /** Set when the engine closes: indexing stops between batches (and goes on after the next start). */
  let stopped = false;

  function schedule(table: string, job: (table: string) => Promise<void>) {
    const next = (queues.get(table) ?? Promise.resolve()).then(() => job(table)).catch(onError);
    queues.set(table, next);
    void next.then(() => {
      if (queues.get(table) === next) queues.delete(table);
    });
  }

  /** Indexes the table's items from where the last batch stopped, until all are or TTL is switched off. */
  async function backfill(table: string) {
    while (!stopped) {
      const setting = settings.get(table);
      if (!setting?.enabled || setting.indexed) return;
      const description = await getTable(store, table, false).catch(() => undefined);
      if (!description) return;
      const prefix = levelKeys.item(table, '');
      const from = setting.indexedThrough;
      const range = { ...(from === undefined ? { gte: prefix } : { gt: prefix + from }), lt: `${prefix}\xff`, limit: BACKFILL_BATCH };
      const ops: LevelOp[] = [];
      let last = from;
      let count = 0;
      for await (const value of db.values(range)) {
        const item = value as Item;
        last = dynaliteDb.createKey(item, description);
        ops.push(...indexOps({ tableName: table, itemKey: last, keys: keyOf(item, description), newItem: item }, setting.attributeName));
        count++;
      }
      // Switched meanwhile: the switch scheduled its own job.
      if (settings.get(table) !== setting) return;
      const done = count < BACKFILL_BATCH;
      await settings.save(table, { ...setting, indexed: done, indexedThrough: done ? undefined : last }, ops);
      itemsIndexed += count;
      if (done) return;
    }
  }

  /**
   * Deletes the table's index entries, all of them even if TTL is switched on again (or the
   * table created again) meanwhile: the indexing that follows it in the queue re-adds the
   * entries of the items there are.
   */
  async function clear(table: string) {
    // Not stopped by close: nothing would resume it after a restart, and deleting keys is quick.
    for (;;) {
      const keys: string[] = [];
      for await (const key of db.keys({ gte: indexPrefix(table), lt: `${indexPrefix(table)}\xff`, limit: CLEAR_BATCH })) keys.push(key);
      if (keys.length > 0) await db.batch(keys.map((key) => ({ type: 'del' as const, key })));
      if (keys.length < CLEAR_BATCH) return;
    }
  }

  return {
    backfill: (table: string) => schedule(table, backfill),
    clear: (table: string) => schedule(table, clear),
    /** Waits until every job asked for so far is done. */
    async idle() {
      while (queues.size > 0) await Promise.all([...queues.values()]);
    },
    /** Stops indexing at its next batch; it goes on after the next start. */
    stop() {
      stopped = true;
    },
    stats: () => ({ itemsIndexed }),
  };
}
