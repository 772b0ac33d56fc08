/**
 * Time to live: UpdateTimeToLive/DescribeTimeToLive and the sweeper that deletes expired
 * items. Like DynamoDB, deletion is late (by a configurable delay), each delete is a
 * normal REMOVE in the stream marked as done by the service, and an item whose expiry
 * changed since it was seen is left alone.
 */
import { getTable, type Item, keyOf, levelKeys, type MainDb, type Store, validateWith } from './dynalite.ts';
import { EngineError, errors, isConditionalFailure } from './errors.ts';
import type { ItemWriteOperation } from './items.ts';

export interface TtlOptions {
  /** How often the sweeper looks for expired items. */
  sweepIntervalMs: number;
  /** How long after its expiry an item is deleted at the earliest. */
  deleteDelayMs: number;
  /** How long after one UpdateTimeToLive the next is refused (DynamoDB: one hour; 0 allows toggling). */
  updateIntervalMs: number;
}

interface TtlSetting {
  attributeName: string;
  enabled: boolean;
  /** When UpdateTimeToLive last changed it (absent in data written before this was kept). */
  updatedAt?: number;
}

/** DynamoDB leaves alone items whose expiry lies more than five years in the past. */
const FIVE_YEARS_MS = 5 * 365 * 24 * 3600 * 1000;
const settingKey = (table: string) => `rp-ttl~${table}`;

const updateSpec = {
  types: {
    TableName: { type: 'String', notNull: true, regex: '[a-zA-Z0-9_.-]+', lengthGreaterThanOrEqual: 3, lengthLessThanOrEqual: 255 },
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
const describeSpec = { types: { TableName: updateSpec.types.TableName } };

type Write = (operation: ItemWriteOperation, body: Record<string, unknown>, options: { byTtl: boolean }) => Promise<unknown>;

export function createTtl(store: Store, db: MainDb, write: Write, now: () => number, options: TtlOptions) {
  const settings = new Map<string, TtlSetting>();

  async function load() {
    for await (const value of db.values({ gte: 'rp-ttl~', lt: 'rp-ttl~\xff' })) {
      const { table, ...setting } = value as TtlSetting & { table: string };
      settings.set(table, setting);
    }
  }

  async function update(body: Record<string, unknown>) {
    const data = validateWith(updateSpec, body, undefined);
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
    const setting = { attributeName: spec.AttributeName, enabled: spec.Enabled, updatedAt: at };
    await db.put(settingKey(tableName), { table: tableName, ...setting });
    settings.set(tableName, setting);
    return { TimeToLiveSpecification: { Enabled: spec.Enabled, AttributeName: spec.AttributeName } };
  }

  async function describe(body: Record<string, unknown>) {
    const data = validateWith(describeSpec, body, undefined);
    await getTable(store, data.TableName as string, false);
    const setting = settings.get(data.TableName as string);
    return {
      TimeToLiveDescription: setting?.enabled
        ? { TimeToLiveStatus: 'ENABLED', AttributeName: setting.attributeName }
        : { TimeToLiveStatus: 'DISABLED' },
    };
  }

  async function forget(tableName: string) {
    settings.delete(tableName);
    await db.batch([{ type: 'del', key: settingKey(tableName) }]);
  }

  /** Deletes every item whose expiry passed more than the delay ago. Returns how many it deleted. */
  async function sweep() {
    let deleted = 0;
    const at = now();
    for (const [tableName, setting] of settings) {
      if (!setting.enabled) continue;
      const table = await getTable(store, tableName).catch(() => undefined);
      if (!table) continue;
      const prefix = levelKeys.item(tableName, '');
      const expired: Item[] = [];
      for await (const value of db.values({ gte: prefix, lt: `${prefix}\xff` })) {
        const item = value as Item;
        const expiry = Number((item[setting.attributeName] as { N?: string } | undefined)?.N);
        if (!Number.isFinite(expiry)) continue;
        const expiresAt = expiry * 1000;
        if (expiresAt + options.deleteDelayMs <= at && at - expiresAt <= FIVE_YEARS_MS) expired.push(item);
      }
      for (const item of expired) {
        try {
          await write(
            'DeleteItem',
            {
              TableName: tableName,
              Key: keyOf(item, table),
              // Only if the expiry is still the one we saw: a renewal in between keeps the item.
              ConditionExpression: '#expiry = :expiry',
              ExpressionAttributeNames: { '#expiry': setting.attributeName },
              ExpressionAttributeValues: { ':expiry': item[setting.attributeName] },
            },
            { byTtl: true },
          );
          deleted++;
        } catch (err) {
          // Renewed since we looked (condition failed), or the table went away mid-sweep.
          if (isConditionalFailure(err)) continue;
          if (err instanceof EngineError && err.code === 'ResourceNotFoundException') break;
          throw err;
        }
      }
    }
    return deleted;
  }

  return { load, update, describe, forget, sweep, intervalMs: options.sweepIntervalMs };
}
