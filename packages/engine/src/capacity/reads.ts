/**
 * GetItem and Query under the throughput model: dynalite reads and counts the units (it
 * counts as DynamoDB does: whole items, a Query's items summed before rounding, half for an
 * eventually consistent read); the units are then taken from the partition read, a global
 * index's own for a Query on one. Only registered while the model is on.
 */
import { getTable, runAction, type Store, type TableDescription, validate } from '../dynalite.ts';
import type { RequestContext } from '../request-context.ts';
import { admit, type Throughput } from './index.ts';
import { askedFor } from './report.ts';
import { type Line, partitionOf, tablePartition } from './units.ts';

interface Counted {
  CapacityUnits: number;
  TableName: string;
  Table?: { CapacityUnits: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits: number }>;
  LocalSecondaryIndexes?: Record<string, { CapacityUnits: number }>;
}

interface KeyCondition {
  AttributeValueList: Record<string, unknown>[];
}

type IndexOf = { IndexName: string; KeySchema: { AttributeName: string; KeyType: string }[] };

function queryLines(table: TableDescription, data: Record<string, unknown>, counted: Counted): Line[] {
  const name = data.IndexName as string | undefined;
  const global = ((table.GlobalSecondaryIndexes ?? []) as IndexOf[]).find((index) => index.IndexName === name);
  const local = ((table.LocalSecondaryIndexes ?? []) as IndexOf[]).find((index) => index.IndexName === name);
  const schema = (global ?? local)?.KeySchema ?? table.KeySchema;
  const hash = (schema.find((key) => key.KeyType === 'HASH') ?? schema[0])?.AttributeName ?? '';
  const conditions = data.KeyConditions as Record<string, KeyCondition>;
  const partition = partitionOf({ [hash]: conditions[hash]?.AttributeValueList[0] ?? {} }, hash);
  const on = (index: IndexOf, isGlobal: boolean, units: Record<string, { CapacityUnits: number }> | undefined): Line => ({
    table,
    index: { name: index.IndexName, global: isGlobal },
    partition,
    units: units?.[index.IndexName]?.CapacityUnits ?? 0,
    action: 0,
  });
  // A global index has partitions of its own; a local one reads the table's (and may fetch from it).
  if (global) return [on(global, true, counted.GlobalSecondaryIndexes)];
  const lines: Line[] = [{ table, partition, units: counted.Table?.CapacityUnits ?? 0, action: 0 }];
  if (local) lines.push(on(local, false, counted.LocalSecondaryIndexes));
  return lines;
}

export function createMeteredReads(store: Store, throughput: Throughput) {
  async function read(operation: 'GetItem' | 'Query', body: Record<string, unknown>, { region }: RequestContext) {
    const data = validate(operation, body, store);
    const asked = askedFor(data.ReturnConsumedCapacity);
    const result = await runAction(operation, store, { ...data, ReturnConsumedCapacity: 'INDEXES' });
    const counted = result.ConsumedCapacity as Counted;
    const table = await getTable(store, data.TableName as string);
    const lines =
      operation === 'GetItem'
        ? [
            {
              table,
              partition: tablePartition(table, data.Key as Record<string, Record<string, unknown>>),
              units: counted.CapacityUnits,
              action: 0,
            },
          ]
        : queryLines(table, data, counted);
    admit(throughput, 'read', lines, region);
    if (asked === 'TOTAL') result.ConsumedCapacity = { CapacityUnits: counted.CapacityUnits, TableName: counted.TableName };
    else if (!asked) delete result.ConsumedCapacity;
    return result;
  }

  return {
    get: (body: Record<string, unknown>, context: RequestContext) => read('GetItem', body, context),
    query: (body: Record<string, unknown>, context: RequestContext) => read('Query', body, context),
  };
}
