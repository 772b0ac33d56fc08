/**
 * Stream shards held by server replicas, on the same lease primitive as units of work: a
 * system lease row per shard (`_sys#unit#<shardId>`), whose fencing token guards the
 * shard's checkpoint kept in the same row. Only the live holder with its token moves the
 * checkpoint, so a replica that stalled past its lease (and may have been replaced) can
 * neither move it nor call the shard drained.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { acquireCase, rowExpiry } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { attr, type Item, toLease } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { keys, SYSTEM_TENANT } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, rowAfter, write } from '../write.ts';
import { acquireUpdate } from './writes.ts';

export interface ShardLease extends Lease {
  /** Sequence number of the last record the holders handed on (absent: none yet). */
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

  return {
    /** The shard's row as stored (null: never held). Strongly consistent. */
    read,

    /**
     * Takes the shard if it is free or its lease ran out, with a token above every earlier one.
     * @param seen the row as last read (picks the update's case); @returns null when another holds it or the row moved on
     */
    async acquire(shardId: string, owner: string, ttlSeconds: number, seen: ShardLease | null): Promise<ShardLease | null> {
      const at = now().getTime();
      const how = acquireCase(seen?.token, at, at + ttlSeconds * 1000, retention.leaseSeconds);
      try {
        const row = await write(deps, [
          acquireUpdate(tableName, { tenant: SYSTEM_TENANT, unitId: shardId, owner, ttlSeconds }, at, how, retention.leaseSeconds),
        ]);
        return toShardLease(rowAfter(row, `acquiring shard ${shardId}`));
      } catch (err) {
        if (err instanceof ConditionFailed) return null;
        throw err;
      }
    },

    /**
     * The holder renews, hands back or finishes the shard, keeping its checkpoint.
     * @returns the row after, or null when the lease is no longer this holder's (lost: stop reading)
     */
    async hold({ lease, checkpoint, ttlSeconds, drained }: HolderWrite): Promise<ShardLease | null> {
      const at = now().getTime();
      const until = at + ttlSeconds * 1000;
      const sets = ['#leaseUntil = :until', '#expiresAt = :ttl'];
      if (checkpoint !== undefined) sets.push('#checkpoint = :checkpoint');
      if (drained) sets.push('#drained = :true');
      try {
        const row = await write(deps, [
          {
            Update: {
              TableName: tableName,
              Key: keys.lease(SYSTEM_TENANT, lease.unitId),
              // Only the live holder with its own token: after expiry another replica may hold the
              // shard (or be about to), and a stale holder must not move its checkpoint.
              ConditionExpression: `${conditions.present} AND #owner = :owner AND #token = :token AND ${conditions.leaseLive}`,
              UpdateExpression: `SET ${sets.join(', ')} ADD #version :one`,
              ExpressionAttributeNames: {
                '#owner': attr.owner,
                '#token': attr.token,
                '#leaseUntil': attr.leaseUntil,
                '#expiresAt': attr.expiresAt,
                '#version': attr.version,
                ...(checkpoint !== undefined ? { '#checkpoint': attr.checkpoint } : {}),
                ...(drained ? { '#drained': attr.drained } : {}),
              },
              ExpressionAttributeValues: {
                ':owner': lease.owner,
                ':token': lease.token,
                ':now': at,
                ':until': until,
                ':ttl': rowExpiry(until, lease.token, retention.leaseSeconds),
                ':one': 1,
                ...(checkpoint !== undefined ? { ':checkpoint': checkpoint } : {}),
                ...(drained ? { ':true': true } : {}),
              },
            },
          },
        ]);
        return toShardLease(rowAfter(row, `holding shard ${lease.unitId}`));
      } catch (err) {
        if (err instanceof ConditionFailed) return null;
        throw err;
      }
    },
  };
}

export type ShardLeases = ReturnType<typeof createShardLeases>;
