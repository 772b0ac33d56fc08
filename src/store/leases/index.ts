/**
 * Leases on units of work, with fencing tokens: every acquire returns a token larger than
 * any issued before for the unit, also across release, expiry, reclaim and TTL deletion.
 * domain/lease.ts plans each request (its rule and its change); writes.ts makes the plan one
 * conditional update, sent alone without an idempotency key (plain.ts), beside the key's claim
 * with one (keyed.ts).
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import * as rules from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { toLease } from '../../table/codec.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { metered, type TableReads } from '../reads.ts';
import { createKeyedLeases } from './keyed.ts';
import { createPlainLeases } from './plain.ts';
import type { Unit } from './writes.ts';

export interface AcquireLease extends rules.AcquireCommand {
  tenant: string;
}

export interface RenewLease extends rules.RenewCommand {
  tenant: string;
}

export interface ReleaseLease extends rules.ReleaseCommand {
  tenant: string;
}

export function createLeaseStore(deps: StoreDeps, idempotency: Idempotency) {
  const { doc, tableName, now, retention } = deps;
  const read = async (tenant: string, unitId: string, reads?: TableReads) => {
    const { Item } = await metered(doc, reads).send(
      new GetCommand({ TableName: tableName, Key: keys.lease(tenant, unitId), ConsistentRead: true }),
    );
    return Item ? toLease(Item) : null;
  };
  const plain = createPlainLeases(deps, read);
  const keyed = createKeyedLeases(deps, idempotency, read);
  /** One request's plan, whichever way it is written. */
  const apply = (unit: Unit, planner: rules.LeasePlanner, idem?: IdempotencyKey) =>
    idem ? keyed(idem, unit, planner) : plain(unit, planner);

  return {
    /** The lease row as stored, live or not (null when the unit was never leased). Strongly consistent. */
    read,

    /**
     * Takes the unit if it is free, its lease expired, or the caller holds it already.
     * @throws LeaseHeld while another owner's lease is live
     */
    acquire: async (input: AcquireLease, idem?: IdempotencyKey): Promise<Lease> =>
      apply(input, (at, token) => rules.planAcquire(input, at, retention.leaseSeconds, token), idem),

    /**
     * Extends the caller's live lease to ttlSeconds from now.
     * @throws LeaseLost unless the caller holds it with this token, and it has not expired
     */
    renew: async (input: RenewLease, idem?: IdempotencyKey): Promise<Lease> =>
      apply(input, (at) => rules.planRenew(input, at, retention.leaseSeconds), idem),

    /**
     * Ends the caller's lease now: the unit can be acquired at once, the token is kept.
     * @throws LeaseLost unless the caller holds it with this token
     */
    release: async (input: ReleaseLease, idem?: IdempotencyKey): Promise<Lease> =>
      apply(input, (at) => rules.planRelease(input, at, retention.leaseSeconds), idem),

    /** The live lease on a unit, or null when it is free or its lease has expired. Strongly consistent. */
    async get(tenant: string, unitId: string, reads?: TableReads): Promise<Lease | null> {
      return rules.liveAt(await read(tenant, unitId, reads), now().getTime());
    },
  };
}

export type LeaseStore = ReturnType<typeof createLeaseStore>;
