/**
 * Leases on units of work, with fencing tokens: every acquire returns a token larger than
 * any issued before for the unit, also across release, expiry, reclaim and TTL deletion.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { Contention, LeaseHeld, LeaseLost } from '../domain/errors.ts';
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
/** Acquire updates tried before giving up (each failure but the last is a row that changed meanwhile). */
const MAX_ACQUIRE_ATTEMPTS = 4;
/** Reads and versioned writes of a keyed request before giving up (each failure is another writer in between). */
const MAX_EXACT_ATTEMPTS = 8;
const TOKEN_EPOCH_S = TOKEN_EPOCH_MS / 1000;

type Acquire = 'floor' | 'increment' | 'ahead';

export function createLeaseStore({ doc, tableName, now, retention }: StoreDeps, idempotency: Idempotency) {
  const read = async (tenant: string, unitId: string) => {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.lease(tenant, unitId), ConsistentRead: true }));
    return Item ? toLease(Item) : null;
  };
  /**
   * When TTL may delete a lease row: `retention` after the lease's end, and never before the
   * clock's floor has passed the row's token, so that a new row's first token (the floor) is
   * still larger than every token the deleted row gave out.
   */
  const ttl = (untilMs: number, token = 0) => Math.max(Math.floor(untilMs / 1000) + retention.leaseSeconds, TOKEN_EPOCH_S + token + 1);

  /**
   * The acquire update; token = max(token + 1, floor) where floor is the clock in seconds
   * since the token epoch. `floor`: the token is below the floor (or there is no row yet) and
   * becomes it. `increment`: the token grows by one. `ahead`: likewise, for a token so far
   * ahead of the clock (acquired many times a second for weeks) that the row's TTL must
   * follow the token rather than the lease. Each is conditioned on its own case.
   */
  function acquireWrite({ tenant, unitId, owner, ttlSeconds }: AcquireLease, at: number, how: Acquire): Write {
    const floor = Math.floor((at - TOKEN_EPOCH_MS) / 1000);
    const until = at + ttlSeconds * 1000;
    const takeable = `(${[conditions.leaseFree, conditions.leaseExpired, conditions.leaseMine].join(' OR ')})`;
    const ahead = aheadFrom(until);
    const cases: Record<Acquire, { condition: string; set: string }> = {
      floor: {
        condition: '(attribute_not_exists(#token) OR #token < :floor)',
        set: '#expiresAt = :ttl, #token = :floor ADD #version :one',
      },
      increment: { condition: '#token >= :floor AND #token < :ahead', set: '#expiresAt = :ttl ADD #token :one, #version :one' },
      // The row lives until the floor passes the new token (old token + 1): old token + epoch + 2.
      ahead: { condition: '#token >= :ahead', set: '#expiresAt = #token + :pastToken ADD #token :one, #version :one' },
    };
    return {
      Update: {
        TableName: tableName,
        Key: keys.lease(tenant, unitId),
        // Free, expired, or already mine: one holder at a time. The token only grows (fencing).
        ConditionExpression: `${takeable} AND ${cases[how].condition}`,
        UpdateExpression: `SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until, ${cases[how].set}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: {
          ':unitId': unitId,
          ':owner': owner,
          ':acquiredAt': new Date(at).toISOString(),
          ':until': until,
          ':now': at,
          ':one': 1,
          ...(how === 'ahead' ? {} : { ':floor': floor }),
          ...(how === 'floor' ? {} : { ':ahead': ahead }),
          ...(how === 'ahead' ? { ':pastToken': TOKEN_EPOCH_S + 2 } : { ':ttl': ttl(until) }),
        },
      },
    };
  }

  /** The smallest old token for which the new one (old + 1) would outlive the lease's own TTL. */
  const aheadFrom = (untilMs: number) => Math.floor(untilMs / 1000) + retention.leaseSeconds - TOKEN_EPOCH_S - 1;

  /** Which acquire update applies to a row with this token (none: no row). */
  const acquireFor = (token: number | undefined, at: number, untilMs: number): Acquire => {
    if (token === undefined || token < Math.floor((at - TOKEN_EPOCH_MS) / 1000)) return 'floor';
    return token >= aheadFrom(untilMs) ? 'ahead' : 'increment';
  };

  /** Whether a lease row found by a failed acquire is held by someone else right now. */
  const heldByOther = (found: Lease | null, owner: string, at: number) =>
    !!found && found.expiresAt.getTime() > at && found.owner !== owner;

  /** The last token seen per unit: the next acquire's guess of which update applies (one write, not two). */
  const lastTokens = new Map<string, number>();
  const remember = (unitKey: string, token: number | undefined) => {
    lastTokens.delete(unitKey);
    if (token === undefined) return;
    if (lastTokens.size >= MAX_REMEMBERED_UNITS) lastTokens.delete(lastTokens.keys().next().value as string);
    lastTokens.set(unitKey, token);
  };

  async function acquireOnce(input: AcquireLease): Promise<Item | undefined> {
    const at = now().getTime();
    const until = at + input.ttlSeconds * 1000;
    const unitKey = `${input.tenant}\u0000${input.unitId}`;
    let how = acquireFor(lastTokens.get(unitKey), at, until);
    for (let attempt = 0; attempt < MAX_ACQUIRE_ATTEMPTS; attempt++) {
      try {
        const item = await write(doc, [acquireWrite(input, at, how)]);
        remember(unitKey, item ? Number(item[attr.token]) : undefined);
        return item;
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        const found = err.item ? toLease(err.item) : await read(input.tenant, input.unitId);
        remember(unitKey, found?.token);
        if (heldByOther(found, input.owner, at)) throw new LeaseHeld(found as Lease);
        // Not held: the row's token was in another case than guessed (or changed meanwhile).
        how = acquireFor(found?.token, at, until);
      }
    }
    throw new Contention(`the lease of unit ${input.unitId} kept changing under this acquire; retry`);
  }

  /** An update of the holder's lease: only with its owner and current token. */
  async function holderWrite(
    { tenant, unitId, owner, token }: ReleaseLease,
    set: string,
    values: Record<string, unknown>,
    mustBeLive: boolean,
  ) {
    const at = now().getTime();
    try {
      return await write(doc, [
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
      ]);
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
  /**
   * A request with an idempotency key writes the whole new lease, computed from the row as
   * read and written only if the row is still that version: its result is then known before
   * the write and stored with the key's claim in the same transaction. (A result read back
   * afterwards could already be a later holder's lease.)
   */
  async function exactly(
    tenant: string,
    unitId: string,
    decide: (row: Lease | null, at: number) => Lease,
    claim: (lease: Lease) => TransactItem,
  ) {
    for (let attempt = 0; attempt < MAX_EXACT_ATTEMPTS; attempt++) {
      const row = await read(tenant, unitId);
      const at = now().getTime();
      const lease = decide(row, at);
      const update: Write = {
        Update: {
          TableName: tableName,
          Key: keys.lease(tenant, unitId),
          ConditionExpression: row ? '#version = :seen' : conditions.leaseFree,
          UpdateExpression:
            'SET #unitId = :unitId, #owner = :owner, #acquiredAt = :acquiredAt, #leaseUntil = :until, #token = :token, #version = :version, #expiresAt = :ttl',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: {
            ':unitId': unitId,
            ':owner': lease.owner,
            ':acquiredAt': lease.acquiredAt.toISOString(),
            ':until': lease.expiresAt.getTime(),
            ':token': lease.token,
            ':version': lease.version,
            ':ttl': ttl(lease.expiresAt.getTime(), lease.token),
            ...(row ? { ':seen': row.version } : {}),
          },
        },
      };
      try {
        await write(doc, [update], claim(lease));
        return lease;
      } catch (err) {
        // The row changed since it was read: decide again on the new one.
        if (!(err instanceof ConditionFailed)) throw err;
      }
    }
    throw new Contention(`the lease of unit ${unitId} kept changing under this request; retry`);
  }

  const keyed = (idem: IdempotencyKey, tenant: string, unitId: string, decide: (row: Lease | null, at: number) => Lease) =>
    idempotency.once(idem, {
      perform: (claim) => exactly(tenant, unitId, decide, (lease) => claim(lease)),
      ...codec,
    });

  /** The holder's own lease, as read; LeaseLost unless `owner` holds it with `token` (and, if asked, it is live). */
  const held = (row: Lease | null, { unitId, owner, token }: ReleaseLease, at: number, mustBeLive: boolean) => {
    if (!row || row.owner !== owner || row.token !== token || (mustBeLive && row.expiresAt.getTime() <= at)) {
      throw new LeaseLost(unitId, row, new Date(at));
    }
    return row;
  };

  return {
    /** The lease row as stored, live or not (null when the unit was never leased). Strongly consistent. */
    read,

    /**
     * Takes the unit if it is free, its lease expired, or the caller holds it already.
     * @throws LeaseHeld while another owner's lease is live
     */
    acquire: async (input: AcquireLease, idem?: IdempotencyKey): Promise<Lease> => {
      if (!idem) return toLease(((await acquireOnce(input)) ?? {}) as Item);
      return keyed(idem, input.tenant, input.unitId, (row, at) => {
        if (heldByOther(row, input.owner, at)) throw new LeaseHeld(row as Lease);
        const floor = Math.floor((at - TOKEN_EPOCH_MS) / 1000);
        return {
          unitId: input.unitId,
          owner: input.owner,
          token: row ? Math.max(row.token + 1, floor) : floor,
          acquiredAt: new Date(at),
          expiresAt: new Date(at + input.ttlSeconds * 1000),
          version: (row?.version ?? 0) + 1,
        };
      });
    },

    /**
     * Extends the caller's live lease to ttlSeconds from now.
     * @throws LeaseLost unless the caller holds it with this token, and it has not expired
     */
    renew: async (input: RenewLease, idem?: IdempotencyKey): Promise<Lease> => {
      if (idem) {
        return keyed(idem, input.tenant, input.unitId, (row, at) => {
          const lease = held(row, input, at, true);
          return { ...lease, expiresAt: new Date(at + input.ttlSeconds * 1000), version: lease.version + 1 };
        });
      }
      const until = now().getTime() + input.ttlSeconds * 1000;
      return toLease(
        ((await holderWrite(
          input,
          '#leaseUntil = :until, #expiresAt = :ttl',
          { ':until': until, ':ttl': ttl(until, input.token) },
          true,
        )) ?? {}) as Item,
      );
    },

    /**
     * Ends the caller's lease now: the unit can be acquired at once, the token is kept.
     * @throws LeaseLost unless the caller holds it with this token
     */
    release: async (input: ReleaseLease, idem?: IdempotencyKey): Promise<Lease> => {
      if (idem) {
        return keyed(idem, input.tenant, input.unitId, (row, at) => {
          const lease = held(row, input, at, false);
          return { ...lease, expiresAt: new Date(at), version: lease.version + 1 };
        });
      }
      const at = now().getTime();
      return toLease(
        ((await holderWrite(input, '#leaseUntil = :until, #expiresAt = :ttl', { ':until': at, ':ttl': ttl(at, input.token) }, false)) ??
          {}) as Item,
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
