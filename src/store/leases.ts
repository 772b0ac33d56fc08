/** Leases on units of work, with fencing tokens. */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { LeaseHeld } from '../domain/errors.ts';
import type { Lease } from '../domain/run.ts';
import { attr, toLease } from '../table/codec.ts';
import { conditions, isConditionalCheckFailed, oldItem } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';
import { retryConflicts } from './retry.ts';

export interface AcquireLease {
  tenant: string;
  unitId: string;
  owner: string;
  ttlSeconds: number;
}

export function createLeaseStore({ doc, tableName, now }: StoreDeps) {
  const read = async (tenant: string, unitId: string) => {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.lease(tenant, unitId), ConsistentRead: true }));
    return Item ? toLease(Item) : null;
  };

  return {
    /** The lease row as stored, live or not (null when the unit was never leased). Strongly consistent. */
    read,

    /**
     * Takes the unit if it is free, its lease expired, or the caller holds it already.
     * Every acquire returns a token larger than any issued before for the unit.
     * @throws LeaseHeld while another owner's lease is live
     */
    async acquire({ tenant, unitId, owner, ttlSeconds }: AcquireLease): Promise<Lease> {
      const at = now().getTime();
      try {
        // A resent acquire (lost response) finds the lease already the caller's: it only extends it.
        const { Attributes } = await retryConflicts(() =>
          doc.send(
            new UpdateCommand({
              TableName: tableName,
              Key: keys.lease(tenant, unitId),
              // Free, expired, or already mine: one holder at a time.
              ConditionExpression: [conditions.leaseFree, conditions.leaseExpired, conditions.leaseMine].join(' OR '),
              // The token only ever grows: a stale holder's token is always smaller (fencing).
              UpdateExpression:
                'SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until ADD #token :one, #version :one',
              ExpressionAttributeNames: {
                '#unitId': attr.unitId,
                '#owner': attr.owner,
                '#acquiredAt': attr.acquiredAt,
                '#leaseUntil': attr.leaseUntil,
                '#token': attr.token,
                '#version': attr.version,
              },
              ExpressionAttributeValues: {
                ':unitId': unitId,
                ':owner': owner,
                ':acquiredAt': new Date(at).toISOString(),
                ':until': at + ttlSeconds * 1000,
                ':now': at,
                ':one': 1,
              },
              ReturnValues: 'ALL_NEW',
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            }),
          ),
        );
        return toLease(Attributes ?? {});
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        const found = oldItem(err);
        throw new LeaseHeld(found ? toLease(found) : ((await read(tenant, unitId)) as Lease));
      }
    },

    /** The live lease on a unit, or null when it is free or its lease has expired. Strongly consistent. */
    async get(tenant: string, unitId: string): Promise<Lease | null> {
      const lease = await read(tenant, unitId);
      return lease && lease.expiresAt.getTime() > now().getTime() ? lease : null;
    },
  };
}

export type LeaseStore = ReturnType<typeof createLeaseStore>;
