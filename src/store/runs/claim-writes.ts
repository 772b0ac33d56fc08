/**
 * The writes of a run's claim row (`#claim` in the run's partition), each with the invariant
 * its condition guards. A live claim is listed in the stall index by when it runs out; a claim
 * that ends (released, taken over, its run stalled or finished) leaves the index.
 */
import type { ClaimEnd, RunClaim, RunStatus } from '../../domain/run.ts';
import { attr, type Item } from '../../table/attributes.ts';
import { keys } from '../../table/keys.ts';
import type { Write } from '../write.ts';

const names = {
  '#holder': attr.holder,
  '#token': attr.token,
  '#claimUntil': attr.claimUntil,
  '#version': attr.version,
  '#claimEnded': attr.claimEnded,
};

/** A claim row as written: the holder, the token, until when, and its place in the stall index while live. */
export function claimItem(tenant: string, claim: RunClaim, indexed: boolean): Item {
  return {
    ...keys.claim(tenant, claim.runId),
    ...(indexed ? keys.claimListing(tenant, claim.runId, claim.expiresAt.getTime()) : {}),
    [attr.entity]: 'claim',
    [attr.runId]: claim.runId,
    [attr.holder]: claim.holder,
    [attr.token]: claim.token,
    [attr.acquiredAt]: claim.acquiredAt.toISOString(),
    [attr.claimUntil]: claim.expiresAt.getTime(),
    [attr.version]: claim.version,
    ...(claim.ended ? { [attr.claimEnded]: claim.endedBy ?? true } : {}),
  };
}

/**
 * The claim as decided, put over the row it was decided on: one winner among racing claimers
 * (the row must still be at the version read, or still absent).
 */
export function claimPut(tableName: string, tenant: string, claim: RunClaim, seen: RunClaim | null, indexed = true): Write {
  const previous = claim.version - 1;
  return {
    Put: {
      TableName: tableName,
      Item: claimItem(tenant, claim, indexed),
      ConditionExpression: seen ? '#version = :seen' : 'attribute_not_exists(pk) OR attribute_not_exists(#holder)',
      ExpressionAttributeNames: seen ? { '#version': attr.version } : { '#holder': attr.holder },
      ...(seen ? { ExpressionAttributeValues: { ':seen': previous } } : {}),
    },
  };
}

/** A check that the run is still in `status` (the one a claim's write was decided on). */
export const statusStill = (tableName: string, tenant: string, runId: string, status: RunStatus): Write => ({
  ConditionCheck: {
    TableName: tableName,
    Key: keys.run(tenant, runId),
    ConditionExpression: '#status = :seen',
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: { ':seen': status },
  },
});

/** The update taking a claim out of the stall index, unless the claim changed since it was read. */
export const claimUnlisting = (tableName: string, tenant: string, runId: string, claim: RunClaim) => ({
  TableName: tableName,
  Key: keys.claim(tenant, runId),
  ConditionExpression: '#version = :seen',
  UpdateExpression: 'REMOVE gsi1pk, gsi1sk',
  ExpressionAttributeNames: { '#version': attr.version },
  ExpressionAttributeValues: { ':seen': claim.version },
});

/**
 * The claim back in the stall index, by when it ran out or runs out (its run can stall again:
 * approved), while it is the claim read; fenced by `token` too when the request carries one.
 */
export function claimRelisting(tableName: string, tenant: string, claim: RunClaim, at: number, token?: number): Write {
  const guard = token === undefined ? undefined : fenced(token, at);
  const listing = keys.claimListing(tenant, claim.runId, claim.expiresAt.getTime());
  return {
    Update: {
      TableName: tableName,
      Key: keys.claim(tenant, claim.runId),
      UpdateExpression: 'SET gsi1pk = :listPk, gsi1sk = :listSk',
      ConditionExpression: `#version = :seen${guard ? ` AND ${guard.condition}` : ''}`,
      ExpressionAttributeNames: {
        '#version': attr.version,
        ...(guard?.names ?? {}),
      },
      ExpressionAttributeValues: { ':seen': claim.version, ':listPk': listing.gsi1pk, ':listSk': listing.gsi1sk, ...(guard?.values ?? {}) },
    },
  };
}

/**
 * The fencing condition as its parts: the claim row's token is `token`, its claim has not run
 * out at `at`, and it was not ended. An end is marked, not only dated: a write sent before the
 * claim ended (by a clock a little behind, or queued a while) still finds it ended.
 */
const fenced = (token: number, at: number) => ({
  condition: '#token = :fenceToken AND #claimUntil > :fenceNow AND attribute_not_exists(#claimEnded)',
  names: { '#token': names['#token'], '#claimUntil': names['#claimUntil'], '#claimEnded': names['#claimEnded'] },
  values: { ':fenceToken': token, ':fenceNow': at },
});

/** A write fenced by the run's claim: it lands only while `token` is the run's live claim (ClaimLost otherwise). */
export function fence(tableName: string, tenant: string, runId: string, token: number, at: number): Write {
  const { condition, names: fenceNames, values } = fenced(token, at);
  return {
    ConditionCheck: {
      TableName: tableName,
      Key: keys.claim(tenant, runId),
      ConditionExpression: condition,
      ExpressionAttributeNames: fenceNames,
      ExpressionAttributeValues: values,
    },
  };
}

/**
 * Ends the run's claim at `at` (a cancelled or finished run has no holder): it is marked ended
 * (no write fenced by its token lands after), it leaves the stall index, the token is kept,
 * and with `expires` the row expires with its run. Fenced by `token` when given (the finishing
 * write is the holder's own); else, with `seen`, only while the claim is still the one read
 * (null: none), so that what the step records of it is true; else unconditional. On a run
 * nobody ever claimed it creates a bare, holderless row.
 */
export function claimEnd(
  tableName: string,
  tenant: string,
  runId: string,
  at: number,
  { token, expires, seen, why }: { token?: number; expires?: number; seen?: RunClaim | null; why: ClaimEnd },
): Write {
  const guard = token === undefined ? undefined : fenced(token, at);
  const still: { condition: string; names: Record<string, string>; values: Record<string, unknown> } | undefined =
    seen === undefined
      ? undefined
      : seen === null
        ? { condition: 'attribute_not_exists(#holder)', names: { '#holder': names['#holder'] }, values: {} }
        : { condition: '#version = :seenVersion', names: {}, values: { ':seenVersion': seen.version } };
  const condition = [guard?.condition, still?.condition].filter(Boolean).join(' AND ');
  return {
    Update: {
      TableName: tableName,
      Key: keys.claim(tenant, runId),
      UpdateExpression: `SET #claimUntil = :endAt, #claimEnded = :ended${expires !== undefined ? ', #ttl = :expires' : ''} ADD #version :one REMOVE gsi1pk, gsi1sk`,
      ...(condition ? { ConditionExpression: condition } : {}),
      ExpressionAttributeNames: {
        '#claimUntil': names['#claimUntil'],
        '#version': names['#version'],
        '#claimEnded': names['#claimEnded'],
        ...(guard?.names ?? {}),
        ...(still?.names ?? {}),
        ...(expires !== undefined ? { '#ttl': attr.ttl } : {}),
      },
      ExpressionAttributeValues: {
        ':endAt': at,
        ':ended': why,
        ':one': 1,
        ...(guard?.values ?? {}),
        ...(still?.values ?? {}),
        ...(expires !== undefined ? { ':expires': expires } : {}),
      },
    },
  };
}

/** The holder's renew or release (of a live claim only): its claim now ends at `untilMs`, and its index entry with it. */
export function holderUpdate(
  tableName: string,
  tenant: string,
  { runId, holder, token }: { runId: string; holder: string; token: number },
  untilMs: number,
  at: number,
  renewing: boolean,
): Write {
  const listing = keys.claimListing(tenant, runId, untilMs);
  return {
    Update: {
      TableName: tableName,
      Key: keys.claim(tenant, runId),
      // Only the holder with the current token, and only while the claim is live (once it ran
      // out, another may have taken the run, or the watcher is to find it stalled).
      ConditionExpression: '#holder = :holder AND #token = :token AND #claimUntil > :now AND attribute_not_exists(#claimEnded)',
      UpdateExpression: renewing
        ? 'SET #claimUntil = :until, gsi1pk = :listPk, gsi1sk = :listSk ADD #version :one'
        : 'SET #claimUntil = :until, #claimEnded = :ended ADD #version :one REMOVE gsi1pk, gsi1sk',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: {
        ':holder': holder,
        ':token': token,
        ':until': untilMs,
        ':one': 1,
        ':now': at,
        ...(renewing ? { ':listPk': listing.gsi1pk, ':listSk': listing.gsi1sk } : { ':ended': 'RELEASED' satisfies ClaimEnd }),
      },
    },
  };
}
