/**
 * Listing a tenant's units and their leases, by unit id. Lease rows carry keys of the listing
 * index spread over RUN_LIST_SHARDS partitions per tenant (as runs are), so no listing key
 * runs hot; a page queries every shard and merges them. The cursor holds each shard's position.
 * The index is eventually consistent: a unit leased a moment ago may show a moment later.
 */
import type { Lease } from '../../domain/run.ts';
import { attr, type Item, toLease } from '../../table/codec.ts';
import { indexes } from '../../table/definition.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { queryPages } from '../query-pages.ts';
import { decodePositions, encodePositions, type ShardPositions, startPositions } from '../shard-cursor.ts';
import { leaseCondition } from './writes.ts';

export interface ListLeases {
  tenant: string;
  /** true: only live leases; false: only units whose lease expired or was released. */
  held?: boolean;
  first: number;
  after?: string;
}

export interface LeasePage {
  leases: { lease: Lease; cursor: string }[];
  hasNextPage: boolean;
}

/** Up to `limit` units of one shard after `from`, by id; also whether the shard has more. */
async function shardPage({ doc, tableName, now }: StoreDeps, { tenant, held }: ListLeases, shard: number, from: string, limit: number) {
  const index = indexes.runsByTenant;
  const at = now().getTime();
  const items: Item[] = [];
  let more = false;
  const filtered = held !== undefined;
  const pages = queryPages(doc, {
    TableName: tableName,
    IndexName: index.name,
    KeyConditionExpression: from ? '#pk = :pk AND #sk > :from' : '#pk = :pk',
    ...(filtered ? { FilterExpression: leaseCondition(held ? 'live' : 'ended') } : {}),
    ExpressionAttributeNames: {
      '#pk': index.pk,
      ...(from ? { '#sk': index.sk } : {}),
      ...(filtered ? { '#leaseUntil': attr.leaseUntil } : {}),
    },
    ExpressionAttributeValues: {
      ':pk': keys.unitShard(tenant, shard),
      ...(from ? { ':from': from } : {}),
      ...(filtered ? { ':now': at } : {}),
    },
    Limit: limit + 1,
  });
  for await (const page of pages) {
    // Rows past their retention are gone, though DynamoDB deletes them late.
    items.push(...(page.Items ?? []).filter((item) => !pastTtl(item, at)));
    more = page.LastEvaluatedKey !== undefined;
    if (items.length > limit) break;
  }
  return { items: items.slice(0, limit), more: items.length > limit || more };
}

type ShardPage = Awaited<ReturnType<typeof shardPage>>;

/** Merges the shards' pages by unit id, up to `first`; each unit handed out moves its shard's position past it. */
function merge(shards: (ShardPage | undefined)[], positions: ShardPositions, first: number): LeasePage {
  const heads = shards.map(() => 0);
  const current = [...positions];
  const out: { lease: Lease; cursor: ShardPositions }[] = [];
  while (out.length < first) {
    let best = -1;
    let bestKey = '';
    shards.forEach((page, shard) => {
      const item = page?.items[heads[shard] as number];
      const key = item ? String(item[indexes.runsByTenant.sk]) : '';
      if (item && (best < 0 || key < bestKey)) {
        best = shard;
        bestKey = key;
      }
    });
    if (best < 0) break;
    const item = (shards[best] as ShardPage).items[heads[best] as number] as Item;
    heads[best] = (heads[best] as number) + 1;
    current[best] = bestKey;
    out.push({ lease: toLease(item), cursor: [...current] });
  }
  // A shard read to its end and all handed out is done.
  const final = current.map((position, shard) => {
    const page = shards[shard];
    if (!page) return null;
    return !page.more && heads[shard] === page.items.length ? null : position;
  });
  const last = out.at(-1);
  if (last) last.cursor = final;
  return {
    leases: out.map(({ lease, cursor }) => ({ lease, cursor: encodePositions(cursor) })),
    hasNextPage: final.some((p) => p !== null),
  };
}

export function createLeaseListing(deps: StoreDeps) {
  return {
    /** @throws InvalidInput for an `after` this listing did not hand out */
    async list(query: ListLeases): Promise<LeasePage> {
      const positions = decodePositions(query.after, 200) ?? startPositions();
      const shards = await Promise.all(
        positions.map((from, shard) => (from === null ? undefined : shardPage(deps, query, shard, from, query.first))),
      );
      return merge(shards, positions, query.first);
    },
  };
}

export type LeaseListing = ReturnType<typeof createLeaseListing>;
