/**
 * Stream shards held by server replicas, on the same lease primitive as units of work: a
 * system lease row per shard (`_sys#unit#<shardId>`), whose fencing token guards the
 * shard's checkpoint kept in the same row. Only the live owner with its token moves the
 * checkpoint, so a replica that stalled past its lease (and may have been replaced) can
 * neither move it nor call the shard drained.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { type LeasePlan, planAcquire, planRenew } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { attr, type Item } from '../../table/attributes.ts';
import { toLease } from '../../table/codec.ts';
import { keys, SYSTEM_TENANT } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, rowAfter, write } from '../write.ts';
import { type LeaseUpdateOptions, leaseUpdate } from './writes.ts';

export interface ShardLease extends Lease {
  /** Sequence number of the last record the owners handed on (absent: none yet). */
  checkpoint?: string;
  /** The shard was read to its end. */
  drained: boolean;
}

const toShardLease = (item: Item): ShardLease => ({
  ...toLease(item),
  checkpoint: typeof item[attr.checkpoint] === 'string' ? (item[attr.checkpoint] as string) : undefined,
  drained: item[attr.drained] === true,
});

export interface HolderWrite {
  lease: ShardLease;
  /** The position to keep (undefined: leave it as it is). */
  checkpoint?: string;
  /** Extend the lease by this many seconds from now; 0 ends it now (a hand-back). */
  ttlSeconds: number;
  drained?: boolean;
}

export function createShardLeases(deps: StoreDeps) {
  const { doc, tableName, now, retention } = deps;
  const read = async (shardId: string) => {
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName, Key: keys.lease(SYSTEM_TENANT, shardId), ConsistentRead: true }),
    );
    return Item ? toShardLease(Item) : null;
  };
  /** The row the plan's update left, or null when its rule refused it (or its case no longer fits the row). */
  const apply = async (plan: LeasePlan, shard?: LeaseUpdateOptions['shard']) => {
    try {
      const row = await write(deps, [leaseUpdate(tableName, SYSTEM_TENANT, plan, { shard })], undefined, { operation: 'checkpoint' });
      return toShardLease(rowAfter(row, `the ${plan.operation} of shard ${plan.unitId}`));
    } catch (err) {
      if (err instanceof ConditionFailed) return null;
      throw err;
    }
  };

  return {
    /** The shard's row as stored (null: never held). Strongly consistent. */
    read,

    /**
     * Takes the shard if it is free or its lease ran out, with a token above every earlier one.
     * @param seen the row as last read (picks the update's case); @returns null when another holds it or the row moved on
     */
    acquire: (shardId: string, owner: string, ttlSeconds: number, seen: ShardLease | null): Promise<ShardLease | null> =>
      apply(planAcquire({ unitId: shardId, owner, ttlSeconds }, now().getTime(), retention.leaseSeconds, seen?.token)),

    /**
     * The owner renews, hands back or finishes the shard, keeping its checkpoint: a renewal by
     * the lease rules (only the live owner with its own token: after expiry another replica may
     * hold the shard, or be about to, and a stale owner must not move its checkpoint).
     * @returns the row after, or null when the lease is no longer this owner's (lost: stop reading)
     */
    hold: ({ lease: { unitId, owner, token }, checkpoint, ttlSeconds, drained }: HolderWrite): Promise<ShardLease | null> =>
      apply(planRenew({ unitId, owner, token, ttlSeconds }, now().getTime(), retention.leaseSeconds), { checkpoint, drained }),
  };
}

export type ShardLeases = ReturnType<typeof createShardLeases>;
