/**
 * The lease rules of domain/lease.ts as DynamoDB's: each fact as a condition (the one place a
 * rule becomes an expression), a plan as one conditional update. Every lease write is one of
 * these: alone without an idempotency key, beside the key's claim in one transaction with it.
 */
import { type LeasePlan, TOKEN_EPOCH_S } from '../../domain/lease.ts';
import type { LeaseFact, LeaseRule } from '../../domain/lease-facts.ts';
import type { Lease } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { conditions } from '../../table/conditions.ts';
import { keys } from '../../table/keys.ts';
import type { Write } from '../write.ts';

/** Each fact on the row; :owner, :token, :now, :floor and :ahead are the plan's args. */
const factConditions: Record<LeaseFact, string> = {
  free: conditions.leaseFree,
  present: conditions.present,
  ended: conditions.leaseExpired,
  live: conditions.leaseLive,
  mine: conditions.leaseMine,
  sameToken: '#token = :token',
  tokenBelowFloor: '(attribute_not_exists(#token) OR #token < :floor)',
  tokenFromFloor: '#token >= :floor',
  tokenBelowAhead: '#token < :ahead',
  tokenFromAhead: '#token >= :ahead',
};

/** A rule as a condition expression: the same answer on a row as domain/lease.ts's `holds`. */
export function leaseCondition(rule: LeaseRule): string {
  if (typeof rule === 'string') return factConditions[rule];
  const [parts, join] = 'any' in rule ? [rule.any, ' OR '] : [rule.all, ' AND '];
  return `(${parts.map(leaseCondition).join(join)})`;
}

const names: Record<string, string> = {
  '#unitId': attr.unitId,
  '#owner': attr.owner,
  '#acquiredAt': attr.acquiredAt,
  '#leaseUntil': attr.leaseUntil,
  '#token': attr.token,
  '#version': attr.version,
  '#ttl': attr.ttl,
  '#checkpoint': attr.checkpoint,
  '#drained': attr.drained,
};

/** Whose lease row: the tenant and the unit. */
export interface Unit {
  tenant: string;
  unitId: string;
}

export interface LeaseUpdateOptions {
  /**
   * The row the write was decided on (the keyed path): it must still be that version, or still
   * absent (null). Undefined: the plan's rule alone decides (the plain path).
   */
  seen?: Lease | null;
  /** A stream shard's owner keeps its position in the lease row (store/leases/shards.ts). */
  shard?: { checkpoint?: string; drained?: boolean };
}

/** `plan` as one conditional update of the unit's lease row. */
export function leaseUpdate(tableName: string, tenant: string, plan: LeasePlan, { seen, shard }: LeaseUpdateOptions = {}): Write {
  const { change, args } = plan;
  const sets = ['#leaseUntil = :until'];
  const adds = ['#version :one'];
  if (change.taken) {
    // Every acquire (re)writes the row's listing keys: the leases listing finds it by them.
    sets.push('#unitId = :unitId', '#owner = :takenBy', '#acquiredAt = :acquiredAt', 'gsi1pk = :listPk', 'gsi1sk = :listSk');
  }
  if (change.token === 'floor') sets.push('#token = :floor');
  if (change.token === 'next') adds.unshift('#token :one');
  if (change.forgetAt === 'afterToken') {
    if (change.token === 'floor') throw new Error(`the acquire of unit ${plan.unitId}: a token at the floor has a TTL of its own`);
    // Read from the old token: the new one (old, or old + 1) plus the epoch and one.
    sets.push('#ttl = #token + :pastToken');
  } else sets.push('#ttl = :ttl');
  if (shard?.checkpoint !== undefined) sets.push('#checkpoint = :checkpoint');
  if (shard?.drained) sets.push('#drained = :drained');

  const condition = [
    // Who may: one owner at a time; only the owner, with its token, renews or releases.
    leaseCondition(plan.may),
    // The token's case: the token only grows, and the row outlives every token it gave out.
    ...(plan.fits ? [leaseCondition(plan.fits)] : []),
    // The row is still the one the result was decided on: the result stored with the key is the one written.
    ...(seen === undefined ? [] : [seen ? '#version = :seen' : conditions.absent]),
  ].join(' AND ');
  const update = `SET ${sets.join(', ')} ADD ${adds.join(', ')}`;
  const listing = change.taken ? keys.leaseListing(tenant, plan.unitId) : undefined;
  const values: Record<string, unknown> = {
    ':owner': args.owner,
    ':token': args.token,
    ':now': args.at,
    ':floor': args.floor,
    ':ahead': args.ahead,
    ':until': change.until,
    ':one': 1,
    ':ttl': change.forgetAt === 'afterToken' ? undefined : change.forgetAt,
    ':pastToken': TOKEN_EPOCH_S + 1 + (change.token === 'next' ? 1 : 0),
    ':unitId': change.taken?.unitId,
    ':takenBy': change.taken?.owner,
    ':acquiredAt': change.taken && new Date(change.taken.acquiredAt).toISOString(),
    ':listPk': listing?.gsi1pk,
    ':listSk': listing?.gsi1sk,
    ':seen': seen?.version,
    ':checkpoint': shard?.checkpoint,
    ':drained': shard?.drained,
  };
  // DynamoDB refuses names and values an expression does not use: send only those it does.
  const used = new Set(`${condition} ${update}`.match(/[#:]\w+/g));
  const only = (all: Record<string, unknown>) => Object.fromEntries(Object.entries(all).filter(([key]) => used.has(key)));
  return {
    Update: {
      TableName: tableName,
      Key: keys.lease(tenant, plan.unitId),
      ConditionExpression: condition,
      UpdateExpression: update,
      ExpressionAttributeNames: only(names) as Record<string, string>,
      ExpressionAttributeValues: only(values),
    },
  };
}
