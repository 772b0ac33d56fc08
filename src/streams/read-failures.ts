/** What a failed GetRecords means for its shard: read on from where it was, from the trim horizon, or rediscover. */
import type { Logger } from '../lib/logger.ts';
import type { ShardReader } from './shards.ts';

const THROTTLED = new Set([
  'LimitExceededException',
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);

export interface RecoveryContext {
  /** Failures met so far, by error name (counted here). */
  failures: Record<string, number>;
  /** Records may have been missed: consumers should fill from the table. */
  onLost: (reason: string) => void;
  log?: Logger;
  /** Waits the back-off for this many failures in a row. */
  backOff: (failures: number) => Promise<void>;
  rediscover: () => void;
}

export async function recoverRead(shard: ShardReader, err: unknown, ctx: RecoveryContext): Promise<'continue' | 'stop'> {
  const name = (err as Error).name;
  ctx.failures[name] = (ctx.failures[name] ?? 0) + 1;
  const lostWithoutPosition = () => {
    shard.iterator = undefined;
    if (!shard.lastSeq && shard.start === 'LATEST') shard.resyncOnOpen = true;
  };
  if (name === 'ExpiredIteratorException') {
    // Re-opened after the last record handed on: nothing is missed.
    lostWithoutPosition();
    return 'continue';
  }
  if (name === 'TrimmedDataAccessException') {
    shard.iterator = undefined;
    shard.lastSeq = undefined;
    shard.start = 'TRIM_HORIZON';
    ctx.onLost(`records of ${shard.id} were trimmed before they were read`);
    return 'continue';
  }
  if (name === 'ResourceNotFoundException') {
    // Rediscover: a shard still listed is read on from where it was; a new stream starts over.
    // Backed off like any failure, so a shard that keeps vanishing cannot make us spin.
    lostWithoutPosition();
    await ctx.backOff(++shard.failures);
    // After this loop has ended, so that discovery can start the shard's next one.
    setImmediate(ctx.rediscover);
    return 'stop';
  }
  if (name === 'ValidationException' && !shard.iterator) {
    // The remembered position no longer fits the shard: start it over.
    shard.lastSeq = undefined;
    shard.start = 'TRIM_HORIZON';
    ctx.onLost(`position in ${shard.id} was refused: ${(err as Error).message}`);
    return 'continue';
  }
  shard.failures++;
  if (!THROTTLED.has(name)) ctx.log?.warn(`GetRecords on ${shard.id} failed (${describe(err)}); backing off`);
  await ctx.backOff(shard.failures);
  return 'continue';
}

function describe(err: unknown) {
  const e = err as Error & { code?: string };
  return `${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
}
