/**
 * Time to live: UpdateTimeToLive/DescribeTimeToLive, the expiry index and the sweeper that
 * deletes expired items. Like DynamoDB, deletion is late (by a configurable delay), each
 * delete is a normal REMOVE in the stream marked as done by the service, and an item whose
 * expiry changed since it was indexed is left alone.
 */
import { getTable, requestTypes, type Store, validate, validateWith } from '../dynalite.ts';
import { errors } from '../errors.ts';
import { createIndexJobs } from './jobs.ts';
import type { TtlSettings } from './settings.ts';
import { createSweeper, type Write } from './sweeper.ts';

export interface TtlOptions {
  /** How often the sweeper looks for expired items. */
  sweepIntervalMs: number;
  /** How long after its expiry an item is deleted at the earliest. */
  deleteDelayMs: number;
  /** How long after one UpdateTimeToLive the next is refused (DynamoDB: one hour; 0 allows toggling). */
  updateIntervalMs: number;
}

const updateSpec = {
  types: {
    // Checked as every table operation checks its TableName (DescribeTimeToLive's, dynalite's spec).
    TableName: requestTypes('DescribeTimeToLive').TableName,
    TimeToLiveSpecification: {
      type: 'FieldStruct<TimeToLiveSpecification>',
      notNull: true,
      children: {
        Enabled: { type: 'Boolean', notNull: true },
        AttributeName: { type: 'String', notNull: true, lengthGreaterThanOrEqual: 1, lengthLessThanOrEqual: 255 },
      },
    },
  },
};

export interface TtlDeps {
  store: Store;
  settings: TtlSettings;
  write: Write;
  now: () => number;
  onError: (err: unknown) => void;
}

export function createTtl({ store, settings, write, now, onError }: TtlDeps, options: TtlOptions) {
  const jobs = createIndexJobs(store, settings, onError);
  const sweeper = createSweeper({ db: store.db, settings, write, now, deleteDelayMs: options.deleteDelayMs });

  /** Reads the settings; tables whose earlier items are not all indexed yet (also data from before the index) get indexed. */
  async function load() {
    await settings.load();
    for (const [table, setting] of settings.entries()) if (setting.enabled && !setting.indexed) jobs.backfill(table);
  }

  async function update(body: Record<string, unknown>) {
    const data = validateWith(updateSpec, body, store);
    const tableName = data.TableName as string;
    const spec = data.TimeToLiveSpecification as { Enabled: boolean; AttributeName: string };
    await getTable(store, tableName, false);
    const current = settings.get(tableName);
    if (spec.Enabled && current?.enabled) throw errors.validation('TimeToLive is already enabled');
    if (!spec.Enabled && !current?.enabled) throw errors.validation('TimeToLive is already disabled');
    if (!spec.Enabled && current && current.attributeName !== spec.AttributeName) {
      throw errors.validation(`TimeToLive is enabled on attribute ${current.attributeName}, not ${spec.AttributeName}`);
    }
    // DynamoDB takes up to an hour to apply a change and refuses another one meanwhile.
    const at = now();
    if (current?.updatedAt !== undefined && at - current.updatedAt < options.updateIntervalMs) {
      throw errors.validation('Time to live has been modified multiple times within a fixed interval');
    }
    await settings.save(tableName, { attributeName: spec.AttributeName, enabled: spec.Enabled, updatedAt: at, indexed: false });
    if (spec.Enabled) jobs.backfill(tableName);
    else jobs.clear(tableName);
    return { TimeToLiveSpecification: { Enabled: spec.Enabled, AttributeName: spec.AttributeName } };
  }

  async function describe(body: Record<string, unknown>) {
    const data = validate('DescribeTimeToLive', body, store);
    await getTable(store, data.TableName as string, false);
    const setting = settings.get(data.TableName as string);
    return {
      TimeToLiveDescription: setting?.enabled
        ? { TimeToLiveStatus: 'ENABLED', AttributeName: setting.attributeName }
        : { TimeToLiveStatus: 'DISABLED' },
    };
  }

  /** A deleted table's setting goes; its index entries are cleared in the background. */
  async function forget(tableName: string) {
    if (!settings.get(tableName)) return;
    await settings.remove(tableName);
    jobs.clear(tableName);
  }

  return {
    load,
    update,
    describe,
    forget,
    tables: () => settings.entries().map(([table]) => table),
    /** Deletes every item due now (after indexing asked for so far is done); resolves to how many. */
    async sweep() {
      await jobs.idle();
      return sweeper.sweep();
    },
    /** Stops indexing at its next batch and waits for writes in flight (before the database closes). */
    async close() {
      jobs.stop();
      await jobs.idle();
      await settings.flush();
    },
    stats: () => ({ ...sweeper.stats(), ...jobs.stats() }),
    intervalMs: options.sweepIntervalMs,
  };
}
