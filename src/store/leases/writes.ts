/**
 * The lease updates, each with the invariant its condition guards. The plain path's conditions
 * keep in DynamoDB the rules that domain/lease.ts decides for the keyed path: one holder at a
 * time, only the holder renews or releases, the token only grows.
 */
import { type AcquireCase, aheadFrom, rowExpiry, TOKEN_EPOCH_S, tokenFloor } from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { attr } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { keys } from '../../table/keys.ts';
import type { Write } from '../write.ts';
import type { AcquireLease, ReleaseLease } from './index.ts';

const names = {
  '#unitId': attr.unitId,
  '#owner': attr.owner,
  '#acquiredAt': attr.acquiredAt,
  '#leaseUntil': attr.leaseUntil,
  '#token': attr.token,
  '#version': attr.version,
  '#expiresAt': attr.expiresAt,
};

/** Every acquire (re)writes the row's listing keys: the leases listing finds it by them. */
const listed = 'gsi1pk = :listPk, gsi1sk = :listSk';
const listing = (tenant: string, unitId: string) => {
  const { gsi1pk, gsi1sk } = keys.leaseListing(tenant, unitId);
  return { ':listPk': gsi1pk, ':listSk': gsi1sk };
};

/** What the plain acquire of each case sets beside the holder, and which rows it applies to. */
const cases: Record<AcquireCase, { condition: string; set: string }> = {
  // No row yet, or its token fell below the floor: the token becomes the floor.
  floor: { condition: '(attribute_not_exists(#token) OR #token < :floor)', set: '#expiresAt = :ttl, #token = :floor ADD #version :one' },
  // The token is at or above the floor, its successor within the lease's retention: it grows by one.
  increment: { condition: '#token >= :floor AND #token < :ahead', set: '#expiresAt = :ttl ADD #token :one, #version :one' },
  // The token runs ahead of the retention: the row lives until the floor passes the new token
  // (old token + 1), that is old token + epoch + 2.
  ahead: { condition: '#token >= :ahead', set: '#expiresAt = #token + :pastToken ADD #token :one, #version :one' },
};

/**
 * The plain acquire: token = max(token + 1, floor), in the case guessed for the row. A row in
 * another case fails the condition and is tried again in its own.
 */
export function acquireUpdate(tableName: string, input: AcquireLease, at: number, how: AcquireCase, retentionSeconds: number): Write {
  const { tenant, unitId, owner, ttlSeconds } = input;
  const until = at + ttlSeconds * 1000;
  const takeable = `(${[conditions.leaseFree, conditions.leaseExpired, conditions.leaseMine].join(' OR ')})`;
  return {
    Update: {
      TableName: tableName,
      Key: keys.lease(tenant, unitId),
      // Free, expired, or already mine: one holder at a time. The token only grows (fencing), in its own case.
      ConditionExpression: `${takeable} AND ${cases[how].condition}`,
      UpdateExpression: `SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until, ${listed}, ${cases[how].set}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: {
        ':unitId': unitId,
        ...listing(tenant, unitId),
        ':owner': owner,
        ':acquiredAt': new Date(at).toISOString(),
        ':until': until,
        ':now': at,
        ':one': 1,
        ...(how === 'ahead' ? {} : { ':floor': tokenFloor(at) }),
        ...(how === 'floor' ? {} : { ':ahead': aheadFrom(until, retentionSeconds) }),
        ...(how === 'ahead' ? { ':pastToken': TOKEN_EPOCH_S + 2 } : { ':ttl': rowExpiry(until, 0, retentionSeconds) }),
      },
    },
  };
}

/** The holder's renew (live lease only) or release: its lease now ends at `untilMs`. */
export function holderUpdate(
  tableName: string,
  input: ReleaseLease,
  untilMs: number,
  at: number,
  mustBeLive: boolean,
  retentionSeconds: number,
): Write {
  const { tenant, unitId, owner, token } = input;
  return {
    Update: {
      TableName: tableName,
      Key: keys.lease(tenant, unitId),
      // Only the holder, with the token it was given: a newer token means someone took over.
      // Renewing also needs the lease live: once it ran out, another may have it by now.
      ConditionExpression: `${conditions.present} AND #owner = :owner AND #token = :token${mustBeLive ? ` AND ${conditions.leaseLive}` : ''}`,
      UpdateExpression: 'SET #leaseUntil = :until, #expiresAt = :ttl ADD #version :one',
      ExpressionAttributeNames: {
        '#owner': attr.owner,
        '#token': attr.token,
        '#version': attr.version,
        '#leaseUntil': attr.leaseUntil,
        '#expiresAt': attr.expiresAt,
      },
      ExpressionAttributeValues: {
        ':owner': owner,
        ':token': token,
        ':one': 1,
        ':until': untilMs,
        ':ttl': rowExpiry(untilMs, token, retentionSeconds),
        ...(mustBeLive ? { ':now': at } : {}),
      },
    },
  };
}

/** The keyed path's write: the whole lease as decided, if the row is still the one it was decided on. */
export function exactUpdate(
  tableName: string,
  { tenant, unitId }: { tenant: string; unitId: string },
  row: Lease | null,
  lease: Lease,
  retentionSeconds: number,
): Write {
  return {
    Update: {
      TableName: tableName,
      Key: keys.lease(tenant, unitId),
      // The row is still the version read (or still absent): the decision holds for it, no other writer came between.
      ConditionExpression: row ? '#version = :seen' : conditions.leaseFree,
      UpdateExpression: `SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until, #token = :token, #version = :version, #expiresAt = :ttl, ${listed}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: {
        ':unitId': unitId,
        ...listing(tenant, unitId),
        ':owner': lease.owner,
        ':acquiredAt': lease.acquiredAt.toISOString(),
        ':until': lease.expiresAt.getTime(),
        ':token': lease.token,
        ':version': lease.version,
        ':ttl': rowExpiry(lease.expiresAt.getTime(), lease.token, retentionSeconds),
        ...(row ? { ':seen': row.version } : {}),
      },
    },
  };
}
