/**
 * TTL settings per table, kept in LevelDB, and the index entries every committed change
 * adds and removes while TTL is on for its table.
 */
import type { LevelOp, MainDb } from '../dynalite.ts';
import { type IndexedChange, indexOps } from './expiry-index.ts';

export interface TtlSetting {
  attributeName: string;
  enabled: boolean;
  /** When UpdateTimeToLive last changed it (absent in data written before this was kept). */
  updatedAt?: number;
  /**
   * Whether every item written before TTL was enabled is in the expiry index (absent in
   * data written before the index existed: those get indexed on start).
   */
  indexed?: boolean;
  /** How far indexing the table's earlier items got (dynalite's key of the last one done). */
  indexedThrough?: string;
}

const prefix = 'rp-ttl~';
const settingKey = (table: string) => `${prefix}${table}`;

export class TtlSettings {
  private readonly settings = new Map<string, TtlSetting>();
  /** Writes of settings go one at a time, in the order they were made, so the last one wins on disk too. */
  private writes: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: MainDb) {}

  async load() {
    for await (const value of this.db.values({ gte: prefix, lt: `${prefix}\xff` })) {
      const { table, ...setting } = value as TtlSetting & { table: string };
      this.settings.set(table, setting);
    }
  }

  get(table: string) {
    return this.settings.get(table);
  }

  entries() {
    return [...this.settings.entries()];
  }

  /** Sets the table's setting (in memory at once) and writes it, with `alongside` in the same batch. */
  save(table: string, setting: TtlSetting, alongside: LevelOp[] = []) {
    this.settings.set(table, setting);
    return this.write([...alongside, { type: 'put', key: settingKey(table), value: { table, ...setting } }]);
  }

  remove(table: string) {
    this.settings.delete(table);
    return this.write([{ type: 'del', key: settingKey(table) }]);
  }

  private write(ops: LevelOp[]) {
    const write = this.writes.then(() => this.db.batch(ops));
    this.writes = write.catch(() => undefined);
    return write;
  }

  /** Waits for writes in flight (before the database closes). */
  flush() {
    return this.writes;
  }

  /** The index entries `changes` remove and add, for the tables with TTL on. */
  indexOps(changes: IndexedChange[]): LevelOp[] {
    const ops: LevelOp[] = [];
    for (const change of changes) {
      const setting = this.settings.get(change.tableName);
      if (setting?.enabled) ops.push(...indexOps(change, setting.attributeName));
    }
    return ops;
  }
}
