/**
 * Leases on units of work, with fencing tokens: every acquire returns a token larger than
 * any issued before for the unit, also across release, expiry, reclaim and TTL deletion.
 * domain/lease.ts decides; a request without an idempotency key goes the plain way (one
 * conditional update holding the same rules), one with a key the exact way.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import * as decide from '../../domain/lease.ts';
import type { Lease } from '../../domain/run.ts';
import { toLease } from '../../table/codec.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import { createKeyedLeases } from './keyed.ts';
import { createPlainLeases } from './plain.ts';

export interface AcquireLease extends decide.AcquireCommand {
  tenant: string;
}

export interface RenewLease extends decide.RenewCommand {
  tenant: string;
}

export interface ReleaseLease extends decide.ReleaseCommand {
  tenant: string;
}

export function createLeaseStore(deps: StoreDeps, idempotency: Idempotency) {
  const { doc, tableName, now, retention } = deps;
  const read = async (tenant: string, unitId: string) => {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.lease(tenant, unitId), ConsistentRead: true }));
    return Item ? toLease(Item) : null;
  };
  const plain = createPlainLeases(deps, read);
  const keyed = createKeyedLeases(deps, idempotency, read);

  return {
    /** The lease row as stored, live or not (null when the unit was never leased). Strongly consistent. */
    read,

    /**
     * Takes the unit if it is free, its lease expired, or the caller holds it already.
     * @throws LeaseHeld while another owner's lease is live
     */
    acquire: async (input: AcquireLease, idem?: IdempotencyKey): Promise<Lease> =>
      idem ? keyed(idem, input, (row, at) => decide.acquire(row, input, at, retention.leaseSeconds)) : plain.acquire(input),

    /**
     * Extends the caller's live lease to ttlSeconds from now.
     * @throws LeaseLost unless the caller holds it with this token, and it has not expired
     */
    renew: async (input: RenewLease, idem?: IdempotencyKey): Promise<Lease> =>
      idem ? keyed(idem, input, (row, at) => decide.renew(row, input, at, retention.leaseSeconds)) : plain.renew(input),

    /**
     * Ends the caller's lease now: the unit can be acquired at once, the token is kept.
     * @throws LeaseLost unless the caller holds it with this token
     */
    release: async (input: ReleaseLease, idem?: IdempotencyKey): Promise<Lease> =>
      idem ? keyed(idem, input, (row, at) => decide.release(row, input, at, retention.leaseSeconds)) : plain.release(input),

    /** The live lease on a unit, or null when it is free or its lease has expired. Strongly consistent. */
    async get(tenant: string, unitId: string): Promise<Lease | null> {
      return decide.liveAt(await read(tenant, unitId), now().getTime());
    },
  };
}

export type LeaseStore = ReturnType<typeof createLeaseStore>;
