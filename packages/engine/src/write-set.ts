/**
 * A write set runs dynalite's item actions against a stand-in store that captures their
 * writes instead of applying them, then commits every captured write (items, index
 * entries, stream records) in ONE LevelDB batch. That makes each change atomic on disk
 * and to readers, gives us the old and new image of every item for its stream record,
 * and lets a transaction evaluate all its actions before anything is written.
 */

import type { Throughput } from './capacity/index.ts';
import {
  type DynaliteOperation,
  dynaliteDb,
  type Item,
  keyOf,
  type LevelOp,
  levelKeys,
  runAction,
  type Store,
  type SubDb,
  type TableDescription,
  unevaluable,
} from './dynalite.ts';
import { errors } from './errors.ts';
import { type ItemLocks, LockConflict, lockId } from './item-locks.ts';
import type { StreamLog } from './streams/log.ts';
import type { ItemChange } from './streams/records.ts';

/** What writes go through: the store, the stream log, the item locks, the TTL expiry index, the throughput model. */
export interface Storage {
  store: Store;
  /** Per-partition throughput limits; absent when off. */
  throughput?: Throughput;
  log: StreamLog;
  locks: ItemLocks;
  /** The expiry index entries that committed changes add and remove. */
  expiry: { indexOps(changes: ItemChange[]): LevelOp[] };
}

type Mode =
  /** One item action: commit when it writes, under the item's lock (taken when dynalite asks for it). */
  | 'single'
  /** A transaction: the caller holds every item lock and commits once all actions ran. */
  | 'transaction';

export interface WriteSetOptions {
  /** Deletes by the TTL sweeper (their stream records say so). */
  byTtl?: boolean;
  /** Fault injection: a wait once the item's lock is held (single writes). */
  stall?: () => Promise<void>;
  /**
   * Called with the changes about to be committed (single writes), with the tables they are
   * in; it may refuse them by throwing (a throttled write), and then nothing is written.
   */
  beforeCommit?: (changes: readonly ItemChange[], tableOf: (name: string) => TableDescription | undefined) => void;
}

export class WriteSet {
  private readonly ops: LevelOp[] = [];
  private readonly changes: ItemChange[] = [];
  private readonly reads = new Map<string, Item | undefined>();
  /** Items read ahead, all in one read, by a transaction holding their locks (they cannot change meanwhile). */
  private readonly readAhead = new Map<string, Item | undefined>();
  private readonly tables = new Map<string, TableDescription>();
  /** Releases of the item locks taken by the running action (to free them if it throws). */
  private readonly held: (() => void)[] = [];
  /** The request of the action running now: its condition is tried before dynalite sees the item. */
  private request: Record<string, unknown> | undefined;
  /** Fails the action running now (its lock was not granted, or dynalite threw once it was). */
  private abort: (err: unknown) => void = () => undefined;
  private readonly real: Store;
  private readonly log: StreamLog;
  /** The stand-in store to hand to dynalite's actions. */
  readonly store: Store;

  constructor(
    private readonly storage: Storage,
    private readonly mode: Mode,
    private readonly options: WriteSetOptions = {},
  ) {
    this.real = storage.store;
    this.log = storage.log;
    this.store = Object.create(this.real, {
      getTable: { value: this.getTable.bind(this) },
      getItemDb: { value: this.itemDb.bind(this) },
      getIndexDb: { value: this.indexDb.bind(this) },
    });
  }

  /** Runs one of dynalite's item actions against this write set. */
  run(operation: DynaliteOperation, data: Record<string, unknown>) {
    this.request = data;
    const releaseAll = () => {
      for (const release of this.held.splice(0)) release();
    };
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      this.abort = (err) => {
        releaseAll();
        reject(err);
      };
      runAction(operation, this.store, data, releaseAll).then(resolve, reject);
    }).finally(() => {
      // A transaction's later check reads its item through this store too: not under this condition.
      this.request = undefined;
    });
  }

  /** dynalite asks for an item's lock: take ours, then let it go on (or fail the write as DynamoDB fails contention). */
  private lock(tableName: string, key: string, exec: Parameters<SubDb['lock']>[1]) {
    this.storage.locks.acquire([lockId(tableName, key)]).then(
      async (release) => {
        this.held.push(release);
        await this.options.stall?.();
        try {
          // dynalite wraps its callback with `release(cb)`: the lock is freed when the action ends.
          exec(
            (done) =>
              ((...args: Parameters<typeof done>) => {
                release();
                return done(...args);
              }) as typeof done,
          );
        } catch (err) {
          this.abort(unevaluable(err));
        }
      },
      (err) => this.abort(err instanceof LockConflict ? errors.transactionConflict() : err),
    );
  }

  /**
   * Reads the items a transaction's actions will read, in one LevelDB read instead of one per
   * action (each a trip to LevelDB's threads). Only under the items' locks, which the caller holds.
   */
  async readAheadItems(items: { tableName: string; key: string }[]) {
    if (this.mode !== 'transaction' || items.length < 2) return;
    const values = await this.real.db.getMany(items.map(({ tableName, key }) => levelKeys.item(tableName, key)));
    for (const [i, { tableName, key }] of items.entries()) {
      this.readAhead.set(readKey(tableName, key), (values[i] ?? undefined) as Item | undefined);
    }
  }

  /**
   * A transaction's item as it stands (read ahead, else read now), kept as the one its action
   * read. Only under the item's lock, which the caller holds.
   */
  async itemAt(table: TableDescription, key: string): Promise<Item | undefined> {
    const at = readKey(table.TableName, key);
    this.tables.set(table.TableName, table);
    const item = this.readAhead.has(at)
      ? this.readAhead.get(at)
      : (((await this.real.db.get(levelKeys.item(table.TableName, key))) ?? undefined) as Item | undefined);
    this.reads.set(at, item);
    return item;
  }

  /**
   * A transaction's Put, without dynalite's action and its turns of the event loop (the item was
   * validated with the request): the condition on the item it replaces, then the item and its
   * index entries staged, as dynalite's putItem would.
   * @throws ConditionalCheckFailedException when the condition does not hold (or cannot be evaluated on the item)
   */
  async putItem(table: TableDescription, key: string, data: Record<string, unknown>) {
    const oldItem = await this.itemAt(table, key);
    if (!conditionHolds(data, oldItem)) throw errors.conditionalCheckFailed();
    const newItem = data.Item as Item;
    const puts: LevelOp[] = [];
    for (const type of ['Local', 'Global'] as const) {
      const indexes = (table[`${type}SecondaryIndexes`] ?? []) as unknown[];
      if (indexes.length === 0) continue;
      const index = (name: string, key: string) => levelKeys.index(type, table.TableName, name, key);
      const actions = dynaliteDb.getIndexActions(indexes, oldItem, newItem, table);
      // Removals first, as dynalite's updateIndexes: an entry that moves is put after its removal.
      for (const { index: name, key } of actions.deletes) this.ops.push({ type: 'del', key: index(name, key) });
      for (const { index: name, key, item } of actions.puts) puts.push({ type: 'put', key: index(name, key), value: item });
    }
    this.ops.push(...puts);
    this.stage(table.TableName, key, newItem);
  }

  /** The item as the action read it before deciding (for ReturnValuesOnConditionCheckFailure). */
  readItem(table: TableDescription, key: Item) {
    return this.reads.get(readKey(table.TableName, dynaliteDb.createKey(key, table)));
  }

  /** The changes captured so far and not yet committed (a transaction's, before it commits). */
  staged(): readonly ItemChange[] {
    return this.changes;
  }

  /** A table an action of this write set looked up. */
  tableOf(name: string) {
    return this.tables.get(name);
  }

  /** The size of the items the captured writes leave (a transaction's aggregate limit counts them). */
  stagedItemBytes() {
    return this.changes.reduce((sum, { newItem }) => sum + (newItem ? dynaliteDb.itemSize(newItem) : 0), 0);
  }

  /**
   * Writes everything captured so far in one batch, with `alongside` (a transaction's token);
   * stream records become readable once it lands.
   */
  async commit(alongside: LevelOp[] = []) {
    if (this.changes.length > 0) this.options.beforeCommit?.(this.changes, (name) => this.tables.get(name));
    const changes = this.changes.splice(0);
    const ops = [...this.ops.splice(0), ...alongside];
    if (ops.length === 0) return;
    const stream = this.log.prepare(changes);
    try {
      await this.real.db.batch([...ops, ...stream.ops, ...this.storage.expiry.indexOps(changes)]);
    } catch (err) {
      stream.settle(false);
      throw err;
    }
    stream.settle(true);
  }

  private getTable(name: string, checkStatus: unknown, cb?: (err: Error | null | undefined, table?: TableDescription) => void) {
    // dynalite's two-argument form (name, cb) means "only an ACTIVE table": keep that.
    const done = (typeof checkStatus === 'function' ? checkStatus : cb) as NonNullable<typeof cb>;
    this.real.getTable(name, typeof checkStatus === 'function' || Boolean(checkStatus), (err, table) => {
      if (table) this.tables.set(name, table);
      done(err, table);
    });
  }

  private itemDb(tableName: string): SubDb {
    const real = this.real.getItemDb(tableName);
    return {
      lock: this.mode === 'single' ? (key, exec) => this.lock(tableName, String(key), exec) : (_key, exec) => exec((done) => done),
      get: (key, cb) => {
        const read = (err: Error | null | undefined, item: Item | undefined) => {
          if (err && err.name !== 'NotFoundError') return cb(err);
          this.reads.set(readKey(tableName, key), item ?? undefined);
          // A condition dynalite cannot evaluate on this item would throw inside its callback.
          // DynamoDB treats such a comparison as false: the condition fails.
          if (this.request && conditionThrows(this.request, item ?? undefined)) return cb(errors.conditionalCheckFailed());
          cb(null, item);
        };
        const ahead = readKey(tableName, String(key));
        // Answered on a later turn of the event loop, as dynalite answers its reads: a transaction
        // on an in-memory store must still let requests arriving meanwhile in (group commit batches them).
        if (this.readAhead.has(ahead)) setImmediate(read, null, this.readAhead.get(ahead));
        else real.get(key, read);
      },
      put: (key, item, cb) => this.stageItem(tableName, key, item as Item, cb),
      del: (key, cb) => this.stageItem(tableName, key, undefined, cb),
      createValueStream: (options) => real.createValueStream(options),
    };
  }

  private indexDb(indexType: string, tableName: string, indexName: string): SubDb {
    const real = this.real.getIndexDb(indexType, tableName, indexName);
    const stage = (op: LevelOp, cb: (err?: Error | null) => void) => {
      this.ops.push(op);
      process.nextTick(cb);
    };
    return {
      lock: real.lock,
      get: (key, cb) => real.get(key, cb),
      put: (key, value, cb) => stage({ type: 'put', key: levelKeys.index(indexType, tableName, indexName, key), value }, cb),
      del: (key, cb) => stage({ type: 'del', key: levelKeys.index(indexType, tableName, indexName, key) }, cb),
      createValueStream: (options) => real.createValueStream(options),
    };
  }

  private stageItem(tableName: string, key: string, newItem: Item | undefined, cb: (err?: Error | null) => void) {
    this.stage(tableName, key, newItem);
    if (this.mode === 'transaction') return process.nextTick(cb);
    this.commit().then(() => cb(), cb);
  }

  /** Captures an item's write and its change (the old image is the one its action read). */
  private stage(tableName: string, key: string, newItem: Item | undefined) {
    const oldItem = this.reads.get(readKey(tableName, key));
    const table = this.tables.get(tableName);
    const image = newItem ?? oldItem;
    this.ops.push(
      newItem ? { type: 'put', key: levelKeys.item(tableName, key), value: newItem } : { type: 'del', key: levelKeys.item(tableName, key) },
    );
    if (table && image) {
      this.changes.push({ tableName, itemKey: key, keys: keyOf(image, table), oldItem, newItem, byTtl: this.options.byTtl });
    }
  }
}

const readKey = (table: string, key: string) => `${table}\u0000${key}`;

function conditionThrows(request: Record<string, unknown>, item: Item | undefined) {
  try {
    dynaliteDb.checkConditional(request, item);
    return false;
  } catch {
    return true;
  }
}

/** Whether the request's condition holds on the item; one dynalite cannot evaluate on it is false, as in DynamoDB. */
export function conditionHolds(request: Record<string, unknown>, item: Item | undefined) {
  try {
    return !dynaliteDb.checkConditional(request, item);
  } catch {
    return false;
  }
}
