/**
 * The engine's throughput model (off unless asked for): DynamoDB's per-partition limits,
 * 1,000 write units and 3,000 read units a second per partition key value, each partition a
 * token bucket (see buckets.ts); a request past its partition's bucket is refused as DynamoDB
 * refuses it (throttle.ts). Units are counted as DynamoDB counts them (units.ts).
 */
import type { Settings } from '../options.ts';
import { PartitionBuckets } from './buckets.ts';
import { type Kind, throttled } from './throttle.ts';
import type { Line } from './units.ts';

export { askedFor, consumedCapacity, type ReturnConsumedCapacity } from './report.ts';
export { isThrottled, throttledReason } from './throttle.ts';
export { type Line, readUnits, tablePartition, unchangedWriteLines, writeLines } from './units.ts';

export interface PartitionLimits {
  /** Write units a second per partition key value (DynamoDB: 1,000). */
  writeUnits: number;
  /** Read units a second per partition key value (DynamoDB: 3,000). */
  readUnits: number;
  /** How many seconds of its rate a partition can spend at once (default 1). */
  burstSeconds: number;
}

/** A global index's units go to its own partitions; the table's and its local indexes' to the table's. */
const bucketKey = (line: Line) => `${line.table.TableName}\u0000${line.index?.global ? line.index.name : ''}\u0000${line.partition}`;

export class Throughput {
  private readonly buckets: Record<Kind, PartitionBuckets>;

  constructor(limits: PartitionLimits, now: () => number) {
    this.buckets = {
      write: new PartitionBuckets(limits.writeUnits, limits.burstSeconds, now),
      read: new PartitionBuckets(limits.readUnits, limits.burstSeconds, now),
    };
  }

  /**
   * Takes the lines' units from their partitions' buckets, all or none.
   * @returns the lines whose buckets fell short (empty: taken)
   */
  take(kind: Kind, lines: Line[]): Line[] {
    const units = new Map<string, number>();
    for (const line of lines) units.set(bucketKey(line), (units.get(bucketKey(line)) ?? 0) + line.units);
    const short = new Set(this.buckets[kind].take(units));
    return short.size === 0 ? [] : lines.filter((line) => short.has(bucketKey(line)));
  }

  /** Buckets kept now, for stats. */
  stats() {
    return { writeBuckets: this.buckets.write.size, readBuckets: this.buckets.read.size };
  }
}

export function createThroughput(settings: Settings) {
  return settings.partitionLimits ? new Throughput(settings.partitionLimits, settings.now) : undefined;
}

/**
 * Takes a request's units, or refuses it as DynamoDB would.
 * @throws EngineError ThrottlingException (on-demand) or ProvisionedThroughputExceededException
 */
export function admit(throughput: Throughput | undefined, kind: Kind, lines: Line[], region: string) {
  if (!throughput) return;
  const short = throughput.take(kind, lines);
  if (short.length > 0) throw throttled(short, kind, region);
}
