/**
 * Leases on units of work, with fencing tokens: every acquire returns a token larger than
 * any issued before for the unit, also across release, expiry, reclaim and TTL deletion.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { LeaseHeld, LeaseLost } from '../domain/errors.ts';
import { TOKEN_EPOCH_MS } from '../domain/limits.ts';
import type { Lease } from '../domain/run.ts';
import { attr, type Item, toLease } from '../table/codec.ts';
import { conditions } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';
import type { Idempotency, IdempotencyKey } from './idempotency.ts';
import { ConditionFailed, type TransactItem, type Write, write } from './write.ts';

export interface AcquireLease {
  tenant: string;
  unitId: string;
  owner: string;
  ttlSeconds: number;
}

export interface RenewLease extends AcquireLease {
  token: number;
}

export interface ReleaseLease {
  tenant: string;
  unitId: string;
  owner: string;
  token: number;
}

const names = {
  '#unitId': attr.unitId,
  '#owner': attr.owner,
  '#acquiredAt': attr.acquiredAt,
  '#leaseUntil': attr.leaseUntil,
  '#token': attr.token,
  '#version': attr.version,
  '#expiresAt': attr.expiresAt,
};

/** Units remembered per process for the acquire order. */
const MAX_REMEMBERED_UNITS = 10_000;

export function createLeaseStore({ doc, tableName, now, retention }: StoreDeps, idempotency: Idempotency) {
  const read = async (tenant: string, unitId: string) => {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.lease(tenant, unitId), ConsistentRead: true }));
    return Item ? toLease(Item) : null;
  };
  /** The TTL of a lease row: long after the lease's end (the row carries the fencing token). */
  const ttl = (untilMs: number) => Math.floor(untilMs / 1000) + retention.leaseSeconds;

  /**
   * The acquire update. `floor`: the token becomes the clock's floor, when it is below it
   * (and on a new row); `increment`: the token grows by one, when it is at or above the floor.
   * Whichever applies: token = max(token + 1, floor).
   */
  function acquireWrite({ tenant, unitId, owner, ttlSeconds }: AcquireLease, at: number, how: 'floor' | 'increment'): Write {
    const floor = Math.floor((at - TOKEN_EPOCH_MS) / 1000);
    const until = at + ttlSeconds * 1000;
    const takeable = `(${[conditions.leaseFree, conditions.leaseExpired, conditions.leaseMine].join(' OR ')})`;
    return {
      Update: {
        TableName: tableName,
        Key: keys.lease(tenant, unitId),
        // Free, expired, or already mine: one holder at a time. The token only grows (fencing).
        ConditionExpression:
          how === 'floor' ? `${takeable} AND (attribute_not_exists(#token) OR #token < :floor)` : `${takeable} AND #token >= :floor`,
        UpdateExpression: `SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until, #expiresAt = :ttl${
          how === 'floor' ? ', #token = :floor ADD #version :one' : ' ADD #token :one, #version :one'
        }`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: {
          ':unitId': unitId,
          ':owner': owner,
          ':acquiredAt': new Date(at).toISOString(),
          ':until': until,
          ':ttl': ttl(until),
          ':now': at,
          ':one': 1,
          ':floor': floor,
        },
      },
    };
  }

  /** Whether a lease row found by a failed acquire is held by someone else right now. */
  const heldByOther = (found: Lease | null, owner: string, at: number) =>
    !!found && found.expiresAt.getTime() > at && found.owner !== owner;

  /** Units whose token was last seen at or above the clock's floor: their next acquire most likely increments. */
  const countingUp = new Set<string>();
  const remember = (unitKey: string, aboveFloor: boolean) => {
    if (!aboveFloor) return void countingUp.delete(unitKey);
    if (countingUp.size >= MAX_REMEMBERED_UNITS) countingUp.clear();
    countingUp.add(unitKey);
  };

  async function acquireOnce(input: AcquireLease, claim?: TransactItem, round = 0): Promise<Item | undefined> {
    const at = now().getTime();
    const floor = Math.floor((at - TOKEN_EPOCH_MS) / 1000);
    const unitKey = `${input.tenant}\u0000${input.unitId}`;
    // Try first the update that most likely applies: one write instead of two for a unit in use.
    const order = countingUp.has(unitKey) ? (['increment', 'floor'] as const) : (['floor', 'increment'] as const);
    for (const how of order) {
      try {
        const item = await write(doc, [acquireWrite(input, at, how)], claim);
        remember(unitKey, true);
        return item;
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        const found = err.item ? toLease(err.item) : await read(input.tenant, input.unitId);
        remember(unitKey, !!found && found.token >= floor);
        if (heldByOther(found, input.owner, at)) throw new LeaseHeld(found as Lease);
        // Not held: the other update applies (the token was on the other side of the floor).
      }
    }
    // Both refused, yet not held when looked at: the row changed in between. Look again.
    const found = await read(input.tenant, input.unitId);
    if (heldByOther(found, input.owner, at)) throw new LeaseHeld(found as Lease);
    if (round >= 3) throw new Error(`the lease row of ${input.unitId} kept changing under acquire; retry`);
    return acquireOnce(input, claim, round + 1);
  }

  /** An update of the holder's lease: only with its owner and current token. */
  async function holderWrite(
    { tenant, unitId, owner, token }: ReleaseLease,
    set: string,
    values: Record<string, unknown>,
    mustBeLive: boolean,
    claim?: TransactItem,
  ) {
    const at = now().getTime();
    try {
      return await write(
        doc,
        [
          {
            Update: {
              TableName: tableName,
              Key: keys.lease(tenant, unitId),
              // Only the holder, with the token it was given: a newer token means someone took over.
              ConditionExpression: `${conditions.present} AND #owner = :owner AND #token = :token${mustBeLive ? ` AND ${conditions.leaseLive}` : ''}`,
              UpdateExpression: `SET ${set} ADD #version :one`,
              ExpressionAttributeNames: { '#owner': attr.owner, '#token': attr.token, '#version': attr.version, ...pickNames(set) },
              ExpressionAttributeValues: { ':owner': owner, ':token': token, ':one': 1, ...(mustBeLive ? { ':now': at } : {}), ...values },
            },
          },
        ],
        claim,
      );
    } catch (err) {
      if (!(err instanceof ConditionFailed)) throw err;
      throw new LeaseLost(unitId, err.item ? toLease(err.item) : null, new Date(at));
    }
  }

  const codec = {
    encode: (lease: Lease) => lease,
    decode: (stored: unknown) => {
      const s = stored as Lease & { acquiredAt: string; expiresAt: string };
      return { ...s, acquiredAt: new Date(s.acquiredAt), expiresAt: new Date(s.expiresAt) };
    },
  };
  const withKey = async (
    idem: IdempotencyKey | undefined,
    tenant: string,
    unitId: string,
    perform: (claim?: TransactItem) => Promise<unknown>,
  ) => {
    if (!idem) return toLease(((await perform()) ?? {}) as Item);
    return idempotency.once(idem, {
      perform: async (claim) => void (await perform(claim())),
      readResult: async () => (await read(tenant, unitId)) as Lease,
      ...codec,
    });
  };

  return {
    /** The lease row as stored, live or not (null when the unit was never leased). Strongly consistent. */
    read,

    /**
     * Takes the unit if it is free, its lease expired, or the caller holds it already.
     * @throws LeaseHeld while another owner's lease is live
     */
    acquire: (input: AcquireLease, idem?: IdempotencyKey) =>
      withKey(idem, input.tenant, input.unitId, (claim) => acquireOnce(input, claim)),

    /**
     * Extends the caller's live lease to ttlSeconds from now.
     * @throws LeaseLost unless the caller holds it with this token, and it has not expired
     */
    renew: (input: RenewLease, idem?: IdempotencyKey) => {
      const until = now().getTime() + input.ttlSeconds * 1000;
      return withKey(idem, input.tenant, input.unitId, (claim) =>
        holderWrite(input, '#leaseUntil = :until, #expiresAt = :ttl', { ':until': until, ':ttl': ttl(until) }, true, claim),
      );
    },

    /**
     * Ends the caller's lease now: the unit can be acquired at once, the token is kept.
     * @throws LeaseLost unless the caller holds it with this token
     */
    release: (input: ReleaseLease, idem?: IdempotencyKey) => {
      const at = now().getTime();
      return withKey(idem, input.tenant, input.unitId, (claim) =>
        holderWrite(input, '#leaseUntil = :until, #expiresAt = :ttl', { ':until': at, ':ttl': ttl(at) }, false, claim),
      );
    },

    /** The live lease on a unit, or null when it is free or its lease has expired. Strongly consistent. */
    async get(tenant: string, unitId: string): Promise<Lease | null> {
      const lease = await read(tenant, unitId);
      return lease && lease.expiresAt.getTime() > now().getTime() ? lease : null;
    },
  };
}

/** The #names an update's SET clause uses. */
function pickNames(set: string) {
  return Object.fromEntries(Object.entries(names).filter(([name]) => set.includes(name)));
}

export type LeaseStore = ReturnType<typeof createLeaseStore>;
