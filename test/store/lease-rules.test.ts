/**
 * One rule table through both lease paths. Each case puts the same lease row under two tenants
 * of one table, sends the same command without an idempotency key and with one, and expects
 * the same answer field by field (the lease, or the refusal and all it carries), the same row
 * left behind, and the keyed request's retry answered alike. A rule that one path came to hold
 * differently from the other fails here.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from 'vitest';
import { rowExpiry, tokenFloor } from '../../src/domain/lease.ts';
import type { Lease } from '../../src/domain/run.ts';
import type { IdempotencyKey } from '../../src/store/index.ts';
import { attr } from '../../src/table/attributes.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { storesOnFreshTable } from './fixture.ts';

const RETENTION_S = 3_600;
const { stores, clients, table, clock, sentDuring } = await storesOnFreshTable({ retention: { leaseSeconds: RETENTION_S } });
/** Every command runs at this moment; rows are put relative to it. */
const AT = clock.now();
const FLOOR = tokenFloor(AT);
/** A token so far ahead of the clock that an acquire's row must live as long as its token needs. */
const AHEAD = FLOOR + 2 * RETENTION_S;

/** A lease row as given: who holds it, with which token, ending `endsIn` ms after AT. */
interface Given {
  owner: string;
  token: number;
  endsIn: number;
}
const mine = (token: number, endsIn: number): Given => ({ owner: 'a', token, endsIn });
const bs = (token: number, endsIn: number): Given => ({ owner: 'b', token, endsIn });

/** What `a` asks for. */
type When = { acquire: number } | { renew: number; token: number } | { release: true; token: number };

interface Case {
  given: string;
  row: Given | null;
  when: When;
  /** The parts of the answer the rules fix (both paths must agree on all of it). */
  expected: { owner: string; token: number; endsIn: number } | { refused: string; holder?: string; token?: number };
}

const lost = { refused: 'LeaseLost', holder: undefined };
const cases: Case[] = [
  { given: 'a free unit', row: null, when: { acquire: 30 }, expected: { owner: 'a', token: FLOOR, endsIn: 30_000 } },
  {
    given: "a's own live lease",
    row: mine(FLOOR + 5, 10_000),
    when: { acquire: 30 },
    expected: { owner: 'a', token: FLOOR + 6, endsIn: 30_000 },
  },
  { given: "b's live lease", row: bs(FLOOR + 5, 10_000), when: { acquire: 30 }, expected: { refused: 'LeaseHeld', holder: 'b' } },
  {
    given: "b's lease, expired",
    row: bs(FLOOR + 5, -1_000),
    when: { acquire: 30 },
    expected: { owner: 'a', token: FLOOR + 6, endsIn: 30_000 },
  },
  {
    given: "b's lease, ending now",
    row: bs(FLOOR + 5, 0),
    when: { acquire: 30 },
    expected: { owner: 'a', token: FLOOR + 6, endsIn: 30_000 },
  },
  {
    given: "b's lease, released",
    row: bs(FLOOR + 5, -60_000),
    when: { acquire: 30 },
    expected: { owner: 'a', token: FLOOR + 6, endsIn: 30_000 },
  },
  { given: 'a token below the floor', row: bs(42, -1_000), when: { acquire: 30 }, expected: { owner: 'a', token: FLOOR, endsIn: 30_000 } },
  { given: 'a token far ahead', row: bs(AHEAD, -1_000), when: { acquire: 30 }, expected: { owner: 'a', token: AHEAD + 1, endsIn: 30_000 } },
  {
    given: "a's live lease, far ahead",
    row: mine(AHEAD, 1),
    when: { acquire: 30 },
    expected: { owner: 'a', token: AHEAD + 1, endsIn: 30_000 },
  },
  { given: "a's live lease", row: mine(7, 10_000), when: { renew: 20, token: 7 }, expected: { owner: 'a', token: 7, endsIn: 20_000 } },
  {
    given: "a's live lease, a stale token",
    row: mine(8, 10_000),
    when: { renew: 20, token: 7 },
    expected: { refused: 'LeaseLost', holder: 'a', token: 8 },
  },
  { given: "b's live lease", row: bs(7, 10_000), when: { renew: 20, token: 7 }, expected: { refused: 'LeaseLost', holder: 'b', token: 7 } },
  { given: "a's lease, expired", row: mine(7, -1_000), when: { renew: 20, token: 7 }, expected: lost },
  { given: "a's lease, ending now", row: mine(7, 0), when: { renew: 20, token: 7 }, expected: lost },
  { given: 'a free unit', row: null, when: { renew: 20, token: 7 }, expected: lost },
  { given: "a's live lease", row: mine(7, 10_000), when: { release: true, token: 7 }, expected: { owner: 'a', token: 7, endsIn: 0 } },
  { given: "a's lease, expired", row: mine(7, -5_000), when: { release: true, token: 7 }, expected: { owner: 'a', token: 7, endsIn: 0 } },
  {
    given: "a's live lease, a stale token",
    row: mine(8, 10_000),
    when: { release: true, token: 7 },
    expected: { refused: 'LeaseLost', holder: 'a', token: 8 },
  },
  {
    given: "b's live lease",
    row: bs(7, 10_000),
    when: { release: true, token: 7 },
    expected: { refused: 'LeaseLost', holder: 'b', token: 7 },
  },
  { given: 'a free unit', row: null, when: { release: true, token: 7 }, expected: lost },
];

async function put(tenant: string, unitId: string, row: Given) {
  const until = AT + row.endsIn;
  await clients.doc.send(
    new PutCommand({
      TableName: table,
      Item: {
        ...keys.lease(tenant, unitId),
        ...keys.leaseListing(tenant, unitId),
        [attr.unitId]: unitId,
        [attr.owner]: row.owner,
        [attr.token]: row.token,
        [attr.acquiredAt]: new Date(AT - 60_000).toISOString(),
        [attr.leaseUntil]: until,
        [attr.version]: 3,
        [attr.ttl]: rowExpiry(until, row.token, RETENTION_S),
      },
    }),
  );
}

/** The row as stored, its tenant taken out of its keys (so that two tenants' rows compare). */
async function rowOf(tenant: string, unitId: string) {
  const { Item } = await clients.doc.send(new GetCommand({ TableName: table, Key: keys.lease(tenant, unitId), ConsistentRead: true }));
  if (!Item) return null;
  const { pk, gsi1pk, ...rest } = Item;
  return { ...rest, pk: String(pk).replace(`${tenant}#`, ''), gsi1pk: gsi1pk && String(gsi1pk).replace(`${tenant}#`, '') };
}

function send(tenant: string, unitId: string, when: When, idem?: (operation: string, request: unknown) => IdempotencyKey) {
  const key = (operation: string, request: unknown) => idem?.(operation, request);
  if ('acquire' in when) {
    const input = { tenant, unitId, owner: 'a', ttlSeconds: when.acquire };
    return stores.leases.acquire(input, key('acquireLease', input));
  }
  if ('renew' in when) {
    const input = { tenant, unitId, owner: 'a', token: when.token, ttlSeconds: when.renew };
    return stores.leases.renew(input, key('renewLease', input));
  }
  const input = { tenant, unitId, owner: 'a', token: when.token };
  return stores.leases.release(input, key('releaseLease', input));
}

/** The whole answer: the lease, or the refusal with its message and every field it carries. */
async function answer(request: Promise<Lease>) {
  try {
    return { lease: await request };
  } catch (err) {
    return { refused: { message: (err as Error).message, ...(err as object) } };
  }
}

/** The parts `expected` speaks of. */
function summary({ lease, refused }: Awaited<ReturnType<typeof answer>>) {
  if (lease) return { owner: lease.owner, token: lease.token, endsIn: lease.expiresAt.getTime() - AT };
  const { name, holder, token } = refused as unknown as { name: string; holder?: string; token?: number };
  return { refused: name, holder, ...(token !== undefined ? { token } : {}) };
}

const what = (when: When) => ('acquire' in when ? 'acquires' : 'renew' in when ? 'renews' : 'releases');

describe('the lease rules, without an idempotency key and with one', () => {
  test.each(cases.map((c) => ({ ...c, what: what(c.when) })))('given $given, when a $what', async ({ row, when, expected }) => {
    const unitId = uniqueName('unit');
    if (row) await Promise.all([put('p', unitId, row), put('k', unitId, row)]);
    const key = uniqueName('key');
    const idem = (operation: string, request: unknown): IdempotencyKey => ({ tenant: 'k', key, operation, request });

    const plain = await answer(send('p', unitId, when));
    expect(summary(plain)).toEqual(expected);
    const keyed = await answer(send('k', unitId, when, idem));
    expect(keyed).toEqual(plain);
    const left = await rowOf('p', unitId);
    expect(await rowOf('k', unitId)).toEqual(left);

    // The keyed request again: the first answer (stored, or the same refusal), nothing written twice.
    expect(await answer(send('k', unitId, when, idem))).toEqual(keyed);
    expect(await rowOf('k', unitId)).toEqual(left);
  });
});

describe('what each path costs', () => {
  test('plain: one update (two when an acquire guessed its token case wrong); keyed: its key, the row and one transaction; a retry: its key', async () => {
    const unitId = uniqueName('unit');
    const idem = (key: string) => (operation: string, request: unknown) => ({ tenant: 'k', key, operation, request });
    const update = 'UpdateItemCommand';
    const get = 'GetItemCommand';

    expect(await sentDuring(() => send('p', unitId, { acquire: 30 }))).toEqual([update]);
    await put('p', unitId, bs(FLOOR + 5, 10_000));
    expect(await sentDuring(() => answer(send('p', unitId, { acquire: 30 })))).toEqual([update]);
    await put('p', unitId, mine(FLOOR + 5, 10_000));
    // The unit's last token was remembered at FLOOR + 5: its case is known, one update.
    expect(await sentDuring(() => send('p', unitId, { acquire: 30 }))).toEqual([update]);
    const other = uniqueName('unit');
    await put('p', other, mine(FLOOR + 5, 10_000));
    // Nothing remembered of this unit: the floor's case was guessed, the row's own came back with the refusal.
    expect(await sentDuring(() => send('p', other, { acquire: 30 }))).toEqual([update, update]);
    expect(await sentDuring(() => send('p', other, { renew: 30, token: FLOOR + 6 }))).toEqual([update]);
    expect(await sentDuring(() => send('p', other, { release: true, token: FLOOR + 6 }))).toEqual([update]);

    expect(await sentDuring(() => send('k', unitId, { acquire: 30 }, idem('k1')))).toEqual([get, get, 'TransactWriteItemsCommand']);
    expect(await sentDuring(() => send('k', unitId, { acquire: 30 }, idem('k1')))).toEqual([get]);
    // A refusal with a key looks at the key once more: a twin may have made it (and then its result holds).
    expect(await sentDuring(() => answer(send('k', unitId, { release: true, token: 1 }, idem('k2'))))).toEqual([get, get, get]);
  });
});
