/**
 * The leases listing at the store: lease rows, plain or keyed, carry listing keys spread over
 * the tenant's shards (no listing key runs hot); a listing pages through them by unit id,
 * each once, and tells held from free on the store's clock.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { expect, test } from 'vitest';
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
