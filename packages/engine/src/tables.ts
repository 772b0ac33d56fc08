/**
 * Table operations: dynalite does the table itself; we add what it drops, the
 * StreamSpecification (and the stream behind it) and TTL cleanup on delete. A table's
 * description and its stream's definition are written in one LevelDB batch, so a crash
 * never leaves a new table without the stream it was created with (or a deleted table's
 * stream still enabled).
 */
import {
  type DynaliteOperation,
  getTable,
  type LevelOp,
  levelKeys,
  requestTypes,
  runAction,
  type Store,
  type TableDescription,
  validate,
  validateWith,
} from './dynalite.ts';
import { errors } from './errors.ts';
import { inRegion, tableInRegion } from './region.ts';
import type { RequestContext } from './request-context.ts';
import type { StreamLog } from './streams/log.ts';
import { type ViewType, viewTypes } from './streams/records.ts';
import { withUncachedTables } from './table-cache.ts';

const streamSpec = {
  types: {
    StreamSpecification: {
      type: 'FieldStruct<StreamSpecification>',
      children: {
        StreamEnabled: { type: 'Boolean', notNull: true },
        StreamViewType: { type: 'String', enum: viewTypes },
      },
    },
  },
};

function readStreamSpecification(body: Record<string, unknown>) {
  const data = validateWith(streamSpec, { StreamSpecification: body.StreamSpecification }, undefined);
  const spec = data.StreamSpecification as { StreamEnabled: boolean; StreamViewType?: ViewType } | undefined;
  if (spec?.StreamEnabled && !spec.StreamViewType) {
    throw errors.validation('One or more parameter values were invalid: StreamViewType is required when StreamEnabled is true');
  }
  return spec;
}

type Callback = (err?: Error | null) => void;

export interface TtlOfTables {
  /** Forgets a deleted table's TTL setting (its index entries are cleared in the background). */
  forget(table: string): Promise<void>;
  /** The tables that have a TTL setting. */
  tables(): string[];
}

export function createTables(store: Store, log: StreamLog, ttl: TtlOfTables) {
  /**
   * Runs one of dynalite's table actions; its first write of the table's description goes
   * through `join`, which writes it together with what belongs to it (the stream).
   */
  function runJoined(operation: DynaliteOperation, data: Record<string, unknown>, join: (tableOp: LevelOp) => Promise<unknown>) {
    const real = store.tableDb;
    let joined = false;
    const put = (key: string, value: unknown, cb: Callback) => {
      if (joined) return real.put(key, value, cb);
      joined = true;
      join({ type: 'put', key: levelKeys.table(key), value }).then(() => cb(), cb);
    };
    const tableDb = Object.create(real, { put: { value: put } });
    // UpdateTable and DeleteTable change the description they read before writing it: their own copy.
    return runAction(operation, Object.create(withUncachedTables(store), { tableDb: { value: tableDb } }), data);
  }

  /** Adds the stream members DynamoDB reports on a table, with its ARNs in the client's region. */
  function describe(table: TableDescription, { region }: RequestContext) {
    const stream = log.latest(table.TableName);
    if (!stream) return tableInRegion(table, region);
    return tableInRegion(
      {
        ...table,
        ...(stream.enabled ? { StreamSpecification: { StreamEnabled: true, StreamViewType: stream.viewType } } : {}),
        LatestStreamArn: stream.arn,
        LatestStreamLabel: stream.label,
      },
      region,
    );
  }

  async function create(body: Record<string, unknown>, context: RequestContext) {
    const spec = readStreamSpecification(body);
    const data = validate('CreateTable', body, store);
    const result = await runJoined('CreateTable', data, (tableOp) => {
      const table = (tableOp.value ?? {}) as TableDescription;
      if (!spec?.StreamEnabled || !spec.StreamViewType) return store.db.batch([tableOp]);
      return log.enable(table.TableName, table.TableArn, table.KeySchema, spec.StreamViewType, [tableOp]);
    });
    return { TableDescription: describe(result.TableDescription as TableDescription, context) };
  }

  async function update(body: Record<string, unknown>, context: RequestContext) {
    const spec = readStreamSpecification(body);
    const { StreamSpecification: _, ...rest } = body;
    // With only a stream change there is nothing for dynalite to do (it would refuse the request).
    const tableOnly = Object.keys(rest).some((member) => member !== 'TableName' && rest[member] != null);
    const data = tableOnly || !spec ? validate('UpdateTable', rest, store) : undefined;
    if (!data) validateWith({ types: { TableName: requestTypes('UpdateTable').TableName } }, { TableName: body.TableName }, store);
    const table = await getTable(store, body.TableName as string, false);
    const current = log.current(table.TableName);
    if (spec?.StreamEnabled && current) {
      throw errors.validation(`Table already has an enabled stream: ${inRegion(current.arn, context.region)}`);
    }
    if (spec && !spec.StreamEnabled && !current) {
      throw errors.validation('Table does not have an enabled stream to disable');
    }
    const changeStream = (alongside: LevelOp[]) => {
      if (spec?.StreamEnabled && spec.StreamViewType) {
        return log.enable(table.TableName, table.TableArn, table.KeySchema, spec.StreamViewType, alongside);
      }
      return spec ? log.disable(table.TableName, alongside) : store.db.batch(alongside);
    };
    if (!data) {
      await changeStream([]);
      return { TableDescription: describe(table, context) };
    }
    const result = await runJoined('UpdateTable', data, (tableOp) => changeStream([tableOp]));
    return { TableDescription: describe(result.TableDescription as TableDescription, context) };
  }

  async function remove(body: Record<string, unknown>, context: RequestContext) {
    const data = validate('DeleteTable', body, store);
    const name = data.TableName as string;
    // The response describes the table as it was, with its stream.
    const stream = log.current(name);
    const result = await runJoined('DeleteTable', data, (tableOp) => (stream ? log.disable(name, [tableOp]) : store.db.batch([tableOp])));
    const table = describe(result.TableDescription as TableDescription, context);
    await ttl.forget(name);
    return {
      TableDescription: stream ? { ...table, StreamSpecification: { StreamEnabled: true, StreamViewType: stream.viewType } } : table,
    };
  }

  async function describeTable(body: Record<string, unknown>, context: RequestContext) {
    const data = validate('DescribeTable', body, store);
    const result = await runAction('DescribeTable', store, data);
    return { Table: describe(result.Table as TableDescription, context) };
  }

  /**
   * What a crash between deleting a table and closing its stream or forgetting its TTL left
   * behind (possible with data written before these were one batch) goes on start.
   */
  async function recover() {
    const missing = async (name: string) => !(await getTable(store, name, false).then(Boolean, () => false));
    for (const stream of log.list()) if (stream.enabled && (await missing(stream.tableName))) await log.disable(stream.tableName);
    for (const name of ttl.tables()) if (await missing(name)) await ttl.forget(name);
  }

  return { create, update, remove, describe: describeTable, recover };
}
