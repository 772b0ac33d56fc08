/**
 * Table operations: dynalite does the table itself; we add what it drops, the
 * StreamSpecification (and the stream behind it) and TTL cleanup on delete.
 */
import { getTable, requestTypes, runAction, type Store, type TableDescription, validate, validateWith } from './dynalite.ts';
import { errors } from './errors.ts';
import { inRegion, tableInRegion } from './region.ts';
import type { RequestContext } from './request-context.ts';
import type { StreamLog } from './streams/log.ts';
import { type ViewType, viewTypes } from './streams/records.ts';

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

export function createTables(store: Store, log: StreamLog, forgetTtl: (table: string) => Promise<void>) {
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
    const result = await runAction('CreateTable', store, data);
    const table = result.TableDescription as TableDescription;
    if (spec?.StreamEnabled && spec.StreamViewType) {
      await log.enable(table.TableName, table.TableArn, table.KeySchema, spec.StreamViewType);
    }
    return { TableDescription: describe(table, context) };
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
    const updated = data ? ((await runAction('UpdateTable', store, data)).TableDescription as TableDescription) : table;
    if (spec?.StreamEnabled && spec.StreamViewType) {
      await log.enable(table.TableName, table.TableArn, table.KeySchema, spec.StreamViewType);
    } else if (spec) {
      await log.disable(table.TableName);
    }
    return { TableDescription: describe(updated, context) };
  }

  async function remove(body: Record<string, unknown>, context: RequestContext) {
    const data = validate('DeleteTable', body, store);
    const result = await runAction('DeleteTable', store, data);
    const table = describe(result.TableDescription as TableDescription, context);
    await log.disable(data.TableName as string);
    await forgetTtl(data.TableName as string);
    return { TableDescription: table };
  }

  async function describeTable(body: Record<string, unknown>, context: RequestContext) {
    const data = validate('DescribeTable', body, store);
    const result = await runAction('DescribeTable', store, data);
    return { Table: describe(result.Table as TableDescription, context) };
  }

  return { create, update, remove, describe: describeTable };
}
