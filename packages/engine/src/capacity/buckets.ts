/**
 * A token bucket per partition key value: it refills at the partition's rate and holds at
 * most `burstSeconds` of it. A request is admitted when every bucket it consumes from holds
 * its units (or is full, so that a request larger than a bucket can still go through once
 * and leave it in debt); otherwise it takes nothing.
 */

/** Buckets kept before full ones (which a new bucket would equal) are forgotten. */
const PRUNE_AT = 10_000;

interface Bucket {
  tokens: number;
  at: number;
}

export class PartitionBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly capacity: number;
  private pruneAt = PRUNE_AT;

  constructor(
    /** Units a second. */
    private readonly rate: number,
    burstSeconds: number,
    private readonly now: () => number,
  ) {
    this.capacity = rate * burstSeconds;
  }

  /**
   * Takes `units` from each bucket if all of them hold it; else takes nothing.
   * @returns the keys whose buckets fell short (empty: admitted)
   */
  take(units: Map<string, number>): string[] {
    const at = this.now();
    const short: string[] = [];
    for (const [key, wanted] of units) {
      const level = this.level(key, at);
      const admitted = level >= this.capacity || (level > 0 && level >= wanted);
      if (!admitted) short.push(key);
    }
    if (short.length > 0) return short;
    for (const [key, wanted] of units) this.buckets.set(key, { tokens: this.level(key, at) - wanted, at });
    if (this.buckets.size > this.pruneAt) this.prune(at);
    return short;
  }

  /** How many buckets are kept now (those not full again since their last use). */
  get size() {
    return this.buckets.size;
  }

  private level(key: string, at: number) {
    const bucket = this.buckets.get(key);
    if (!bucket) return this.capacity;
    return Math.min(this.capacity, bucket.tokens + (this.rate * Math.max(0, at - bucket.at)) / 1000);
  }

  private prune(at: number) {
    for (const key of this.buckets.keys()) if (this.level(key, at) >= this.capacity) this.buckets.delete(key);
    this.pruneAt = Math.max(PRUNE_AT, this.buckets.size * 2);
  }
}
