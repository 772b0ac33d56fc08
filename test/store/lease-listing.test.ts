/**
 * The leases listing at the store: lease rows, plain or keyed, carry listing keys spread over
 * the tenant's shards (no listing key runs hot); a listing pages through them by unit id,
 * each once, and tells held from free on the store's clock.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { expect, test } from 'vitest';
import { LISTING_PAGES_PER_SHARD, LISTING_SHARDS } from '../../src/store/listing-pages.ts';
import { keys, RUN_LIST_SHARDS } from '../../src/table/keys.ts';
import { storesOnFreshTable, TENANT } from './fixture.ts';

test('units spread over every shard; pages of 3 list all 40 once, in id order; held follows the clock', async () => {
  const { stores, clients, table, clock } = await storesOnFreshTable();
  const units = Array.from({ length: 40 }, (_, i) => `unit-${String(i).padStart(2, '0')}`);
  for (const [i, unitId] of units.entries()) {
    const idem = i % 2 ? { tenant: TENANT, key: `k-${unitId}`, operation: 'acquireLease', request: { unitId } } : undefined;
    await stores.leases.acquire({ tenant: TENANT, unitId, owner: 'w', ttlSeconds: i < 10 ? 5 : 60 }, idem);
  }
  const { Items = [] } = await clients.doc.send(new ScanCommand({ TableName: table }));
  const shards = new Set(Items.filter((item) => item.sk === 'lease').map((item) => item.gsi1pk));
  expect(shards).toEqual(new Set(Array.from({ length: RUN_LIST_SHARDS }, (_, shard) => keys.unitShard(TENANT, shard))));

  const listAll = async (held?: boolean) => {
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await stores.leaseList.list({ tenant: TENANT, first: 3, after, held });
      seen.push(...page.leases.map(({ lease }) => lease.unitId));
      if (!page.hasNextPage) return seen;
      after = page.leases.at(-1)?.cursor;
    }
  };
  expect(await listAll()).toEqual(units);
  clock.advance(10_000);
  expect(await listAll(true)).toEqual(units.slice(10));
  expect(await listAll(false)).toEqual(units.slice(0, 10));
  expect((await stores.leaseList.list({ tenant: 'other', first: 50 })).leases).toEqual([]);
});

test('held: true among 2,000 ended leases: each page reads a bounded few Queries per shard, and paging by endCursor finds the 3 held, once, in id order', async () => {
  const { stores, clock, sentDuring } = await storesOnFreshTable();
  const unitId = (i: number) => `unit-${String(i).padStart(4, '0')}`;
  const held = [1700, 1850, 2002].map(unitId);
  const ended = Array.from({ length: 2003 }, (_, i) => unitId(i)).filter((id) => !held.includes(id));
  for (let i = 0; i < ended.length; i += 40) {
    await Promise.all(ended.slice(i, i + 40).map((id) => stores.leases.acquire({ tenant: TENANT, unitId: id, owner: 'w', ttlSeconds: 5 })));
  }
  clock.advance(10_000);
  for (const id of held) await stores.leases.acquire({ tenant: TENANT, unitId: id, owner: 'w', ttlSeconds: 600 });

  const seen: string[] = [];
  const pages: number[] = [];
  let after: string | undefined;
  for (;;) {
    expect(pages.length, 'pages before hasNextPage went false').toBeLessThan(20);
    let page: Awaited<ReturnType<typeof stores.leaseList.list>> = { leases: [], hasNextPage: false, endCursor: null };
    const sent = await sentDuring(async () => {
      page = await stores.leaseList.list({ tenant: TENANT, held: true, first: 2, after });
    });
    expect(sent.filter((name) => name === 'QueryCommand').length).toBeLessThanOrEqual(LISTING_SHARDS * LISTING_PAGES_PER_SHARD);
    pages.push(page.leases.length);
    seen.push(...page.leases.map(({ lease }) => lease.unitId));
    if (!page.hasNextPage) break;
    expect(page.endCursor).not.toBeNull();
    after = page.endCursor ?? undefined;
  }
  expect(seen).toEqual(held);
  // The first page's reads ran out among ended leases only: empty, yet the listing went on.
  expect(pages[0]).toBe(0);
});

test('no unit past where another shard was read to: a held unit in a shard stopped short of it comes first', async () => {
  const { stores, clock, sentDuring } = await storesOnFreshTable();
  /** The first `count` ids `prefix-0000`, `prefix-0001`, ... that fall in `shard`. */
  const inShard = (shard: number, prefix: string, count: number) => {
    const ids: string[] = [];
    for (let i = 0; ids.length < count; i++) {
      const id = `${prefix}-${String(i).padStart(4, '0')}`;
      if (keys.leaseListing(TENANT, id).gsi1pk === keys.unitShard(TENANT, shard)) ids.push(id);
    }
    return ids;
  };
  // Shard 0: more ended units than a page reads, then a held one; shard 1: one held unit, after it by id.
  const ended = inShard(0, 'a', LISTING_PAGES_PER_SHARD * 100 + 50);
  const held = [...inShard(0, 'b', 1), ...inShard(1, 'c', 1)];
  for (let i = 0; i < ended.length; i += 40) {
    await Promise.all(ended.slice(i, i + 40).map((id) => stores.leases.acquire({ tenant: TENANT, unitId: id, owner: 'w', ttlSeconds: 5 })));
  }
  clock.advance(10_000);
  for (const id of held) await stores.leases.acquire({ tenant: TENANT, unitId: id, owner: 'w', ttlSeconds: 600 });

  const seen: string[] = [];
  let after: string | undefined;
  for (let pages = 0; ; pages++) {
    expect(pages, 'pages before hasNextPage went false').toBeLessThan(10);
    let page: Awaited<ReturnType<typeof stores.leaseList.list>> = { leases: [], hasNextPage: false, endCursor: null };
    const sent = await sentDuring(async () => {
      page = await stores.leaseList.list({ tenant: TENANT, held: true, first: 3, after });
    });
    expect(sent.filter((name) => name === 'QueryCommand').length).toBeLessThanOrEqual(LISTING_SHARDS * LISTING_PAGES_PER_SHARD);
    seen.push(...page.leases.map(({ lease }) => lease.unitId));
    if (!page.hasNextPage) break;
    after = page.endCursor ?? undefined;
  }
  expect(seen).toEqual(held);
});
