/**
 * A field's `extensions` saying how many requests to the table its resolver makes at most for
 * one parent (a GetItem, a page of a Query, a BatchGetItem each): the cost limit charges the
 * field that on top of its own 1 (http/cost.ts), times the size of every list it is in. A field
 * that reads per item must say so, or the cost misses its reads: test/http/read-cost.slow.test.ts
 * holds the cost of random documents against the reads they make.
 */
import type { Limits } from '../domain/limits.ts';

export type TableReadsOf = number | ((limits: Limits) => number);

export const tableReads = (reads: TableReadsOf) => ({ runplaneTableReads: reads }) as const;

/** The reads a field declared (0 when it reads nothing of the table). */
export function tableReadsOf(extensions: Readonly<Record<string, unknown>> | null | undefined, limits: Limits): number {
  const reads = extensions?.runplaneTableReads as TableReadsOf | undefined;
  return typeof reads === 'function' ? reads(limits) : (reads ?? 0);
}
