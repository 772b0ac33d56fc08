/**
 * ConsumedCapacity in DynamoDB's response shape, per table: TOTAL gives the table's name and
 * its units; INDEXES adds the table's own and each index's (GlobalSecondaryIndexes,
 * LocalSecondaryIndexes) that consumed any.
 */
import type { Line } from './units.ts';

export type ReturnConsumedCapacity = 'TOTAL' | 'INDEXES';

export interface ConsumedCapacity {
  TableName: string;
  CapacityUnits: number;
  Table?: { CapacityUnits: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits: number }>;
  LocalSecondaryIndexes?: Record<string, { CapacityUnits: number }>;
}

/** Whether the request asked for ConsumedCapacity. */
export function askedFor(value: unknown): ReturnConsumedCapacity | undefined {
  return value === 'TOTAL' || value === 'INDEXES' ? value : undefined;
}

/** One entry per table, in the order the tables were first consumed from. */
export function consumedCapacity(lines: Line[], asked: ReturnConsumedCapacity): ConsumedCapacity[] {
  const byTable = new Map<string, ConsumedCapacity>();
  for (const line of lines) {
    const name = line.table.TableName;
    let entry = byTable.get(name);
    if (!entry) {
      entry = { TableName: name, CapacityUnits: 0, ...(asked === 'INDEXES' ? { Table: { CapacityUnits: 0 } } : {}) };
      byTable.set(name, entry);
    }
    entry.CapacityUnits += line.units;
    if (asked !== 'INDEXES') continue;
    if (!line.index) {
      (entry.Table as { CapacityUnits: number }).CapacityUnits += line.units;
      continue;
    }
    const field = line.index.global ? 'GlobalSecondaryIndexes' : 'LocalSecondaryIndexes';
    const indexes = entry[field] ?? {};
    entry[field] = indexes;
    indexes[line.index.name] = { CapacityUnits: (indexes[line.index.name]?.CapacityUnits ?? 0) + line.units };
  }
  return [...byTable.values()];
}
