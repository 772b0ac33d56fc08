/**
 * Capacity units as DynamoDB counts them (Developer Guide, "Capacity unit consumption"): a
 * write unit per 1 KB of the larger of the item before and after the write, at least one; a
 * read unit per 4 KB read, half for an eventually consistent read; twice either in a
 * transaction. An index's writes are counted on the index entries they put or delete.
 */
import { dynaliteDb, type Item, type TableDescription } from '../dynalite.ts';

const KB = 1024;

/** Where units were consumed: the table (with its local indexes, which share its partitions) or a global index. */
export interface Line {
  table: TableDescription;
  /** A global or local secondary index; absent for the table itself. */
  index?: { name: string; global: boolean };
  /** The partition key value the units were consumed on (the index's own for a global index). */
  partition: string;
  units: number;
  /** Which action of a transaction (or request of a batch) consumed them. */
  action: number;
}

interface IndexDefinition {
  IndexName: string;
  KeySchema: { AttributeName: string; KeyType: string }[];
  Projection: { ProjectionType?: string; NonKeyAttributes?: string[] };
}

const bytes = (item: Item | undefined) => (item ? dynaliteDb.itemSize(item) : 0);

/** Write units for an item that was `before` and is `after` (either may be absent): the larger, per KB, at least 1. */
export const writeUnits = (before: Item | undefined, after?: Item) => Math.max(1, Math.ceil(Math.max(bytes(before), bytes(after)) / KB));

/** A partition key value as one string (`S:run#42`), the key of its throughput bucket. */
export function partitionOf(item: Item, attribute: string) {
  const value = item[attribute];
  if (!value) return '';
  const [type = ''] = Object.keys(value);
  return `${type}:${String(value[type])}`;
}

const hashKey = (schema: { AttributeName: string; KeyType: string }[]) =>
  (schema.find((key) => key.KeyType === 'HASH') ?? schema[0])?.AttributeName ?? '';

export const tablePartition = (table: TableDescription, item: Item) => partitionOf(item, hashKey(table.KeySchema));

/** The index's entry for an item (its keys, the table's keys and what it projects), or undefined if the item is not in it. */
function entryOf(index: IndexDefinition, table: TableDescription, item: Item | undefined): Item | undefined {
  if (!item || !index.KeySchema.every(({ AttributeName }) => item[AttributeName] !== undefined)) return undefined;
  if (index.Projection.ProjectionType === 'ALL') return item;
  const entry: Item = {};
  const names = [...index.KeySchema, ...table.KeySchema].map((key) => key.AttributeName);
  if (index.Projection.ProjectionType === 'INCLUDE') names.push(...(index.Projection.NonKeyAttributes ?? []));
  for (const name of names) {
    const value = item[name];
    if (value !== undefined) entry[name] = value;
  }
  return entry;
}

function sameEntry(a: Item, b: Item) {
  const names = Object.keys(a);
  return names.length === Object.keys(b).length && names.every((name) => JSON.stringify(a[name]) === JSON.stringify(b[name]));
}

/**
 * What a write that changed an item from `before` to `after` consumed: on the table, and on
 * each index whose entry it put, changed or deleted (a changed index key is a delete of the
 * old entry on its partition and a put of the new one on its own), times `factor` (2 in a transaction).
 */
export function writeLines(table: TableDescription, before: Item | undefined, after: Item | undefined, factor: number, action = 0) {
  const image = (after ?? before) as Item;
  const lines: Line[] = [{ table, partition: tablePartition(table, image), units: writeUnits(before, after) * factor, action }];
  const indexes = [
    ...((table.GlobalSecondaryIndexes ?? []) as IndexDefinition[]).map((index) => ({ index, global: true })),
    ...((table.LocalSecondaryIndexes ?? []) as IndexDefinition[]).map((index) => ({ index, global: false })),
  ];
  for (const { index, global } of indexes) {
    const old = entryOf(index, table, before);
    const next = entryOf(index, table, after);
    const at = (entry: Item) => (global ? partitionOf(entry, hashKey(index.KeySchema)) : tablePartition(table, entry));
    const line = (entry: Item, units: number) =>
      lines.push({ table, index: { name: index.IndexName, global }, partition: at(entry), units, action });
    const keyOf = (entry: Item) => index.KeySchema.map(({ AttributeName }) => JSON.stringify(entry[AttributeName])).join('\u0000');
    if (old && next && keyOf(old) === keyOf(next)) {
      if (!sameEntry(old, next)) line(next, writeUnits(old, next) * factor);
      continue;
    }
    if (old) line(old, writeUnits(old) * factor);
    if (next) line(next, writeUnits(next) * factor);
  }
  return lines;
}

/**
 * What a write that changed nothing consumed (a refused condition, a delete of an absent
 * item): the item it found (a Put's own item when one was there to replace), or 1 unit for
 * a new one, on the table only.
 */
export function unchangedWriteLines(
  table: TableDescription,
  key: Item,
  found: Item | undefined,
  put: Item | undefined,
  factor: number,
  action = 0,
) {
  const units = found ? writeUnits(put ?? found) : 1;
  return [{ table, partition: tablePartition(table, key), units: units * factor, action }] satisfies Line[];
}

/** Read units for `size` bytes read: per 4 KB, half for an eventually consistent read, twice in a transaction. */
export function readUnits(size: number, read: 'eventual' | 'strong' | 'transactional') {
  const units = Math.max(1, Math.ceil(size / (4 * KB)));
  return read === 'eventual' ? units / 2 : read === 'transactional' ? units * 2 : units;
}

export const itemBytes = bytes;
