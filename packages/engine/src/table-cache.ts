/**
 * Table descriptions kept decoded. dynalite reads a table's description from LevelDB and parses
 * its JSON on every item action (a transaction, once per member and again per write): a
 * fifth of a small transaction's reads. Here the description is decoded once and kept until
 * any write touches a description (dynalite's own, through its table sublevel, and the
 * engine's, in its batches: both reach the main database), and handed out frozen, so no
 * reader can change it for the others. The table actions that change a description in place
 * before writing it (UpdateTable, DeleteTable) read it through `uncached` instead.
 */
import type { Callback, LevelOp, Store, TableDescription } from './dynalite.ts';

const TABLE_PREFIX = 'table~';

const touchesTables = (key: unknown) => typeof key === 'string' && key.startsWith(TABLE_PREFIX);

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}

export interface TableCache {
  /** dynalite's own getTable: a fresh, mutable description read from the database. */
  uncached: Store['getTable'];
  /** The kept description of a table a status-checking reader would find, if there is one. */
  peek(name: string): TableDescription | undefined;
  /** Descriptions kept now (for tests). */
  size(): number;
}

const caches = new WeakMap<Store, TableCache>();

/**
 * A table's description at once when it is kept (else undefined: ask `getTable`), for a request
 * that has its own turns of the event loop to come (a transaction's reads and commit).
 */
export const keptTable = (store: Store, name: string) => caches.get(store)?.peek(name);

/** A store whose getTable reads afresh: for the table actions that change the description they read. */
export function withUncachedTables<S extends Store>(store: S): S {
  const cache = caches.get(store);
  return cache ? Object.create(store, { getTable: { value: cache.uncached } }) : store;
}

/** Makes `store.getTable` answer from decoded descriptions while no write to one is under way. */
export function cacheTables(store: Store): TableCache {
  const uncached = store.getTable.bind(store);
  const kept = new Map<string, TableDescription>();
  /** Bumped by every write to a description, as it starts and as it ends. */
  let generation = 0;
  /** Writes to descriptions started and not yet ended: nothing read meanwhile is kept. */
  let writing = 0;

  const invalidate = () => {
    generation++;
    kept.clear();
  };
  const started = () => {
    writing++;
    invalidate();
  };
  const ended = () => {
    writing--;
    invalidate();
  };

  // Every write reaches the main database's put, del or batch (dynalite's sublevels are prefixes on it).
  const db = store.db as unknown as Record<'put' | 'del' | 'batch', (...args: unknown[]) => unknown>;
  const watch = (method: 'put' | 'del' | 'batch', touches: (args: unknown[]) => boolean) => {
    const original = db[method].bind(db) as (...args: unknown[]) => unknown;
    db[method] = (...args: unknown[]) => {
      if (!touches(args)) return original(...args);
      started();
      const last = args.at(-1);
      if (typeof last === 'function') {
        return original(...args.slice(0, -1), (...results: unknown[]) => {
          ended();
          return (last as (...r: unknown[]) => unknown)(...results);
        });
      }
      let result: unknown;
      try {
        result = original(...args);
      } catch (err) {
        ended();
        throw err;
      }
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        return (result as Promise<unknown>).then(
          (value) => {
            ended();
            return value;
          },
          (err) => {
            ended();
            throw err;
          },
        );
      }
      ended();
      return result;
    };
  };
  watch('put', ([key]) => touchesTables(key));
  watch('del', ([key]) => touchesTables(key));
  watch('batch', ([ops]) => Array.isArray(ops) && (ops as LevelOp[]).some((op) => touchesTables(op?.key)));

  const inUse = (table: TableDescription) => table.TableStatus === 'CREATING' || table.TableStatus === 'DELETING';

  store.getTable = (name: string, checkStatus: boolean | Callback<TableDescription>, cb?: Callback<TableDescription>) => {
    const callback = (typeof checkStatus === 'function' ? checkStatus : cb) as Callback<TableDescription>;
    // Without the flag dynalite checks the status (its flag is then the callback, which is truthy).
    const checking = typeof checkStatus === 'function' ? true : checkStatus;
    const table = kept.get(name);
    // A table being created or deleted is not found by a status-checking reader: dynalite says so.
    if (table && !(checking && inUse(table))) {
      // On a later turn of the event loop, as dynalite's own read answered: requests arriving
      // meanwhile get in between (contended writers, as under the lease load, keep their turns).
      setImmediate(callback, null, table);
      return;
    }
    const from = generation;
    uncached(name, checking, (err, found) => {
      if (!err && found && writing === 0 && generation === from) kept.set(name, deepFreeze(found));
      callback(err, found);
    });
  };

  const peek = (name: string) => {
    const table = kept.get(name);
    return table && !inUse(table) ? table : undefined;
  };
  const cache = { uncached, peek, size: () => kept.size };
  caches.set(store, cache);
  return cache;
}
