/**
 * Listing a tenant's units and their leases, by unit id. Lease rows carry keys of the listing
 * index spread over RUN_LIST_SHARDS partitions per tenant (as runs are), so no listing key
 * runs hot; a page queries every shard and merges them (listing-pages.ts). The cursor holds
 * each shard's position. The index is eventually consistent: a unit leased a moment ago may
 * show a moment later.
 */
import type { Lease } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { toLease } from '../../table/codec.ts';
import { indexes } from '../../table/definition.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { type ListingOrder, mergeShards, ShardReader } from '../listing-pages.ts';
import { metered, type TableReads } from '../reads.ts';
import { decodePositions, startPositions } from '../shard-cursor.ts';
import { leaseCondition } from './writes.ts';

export interface ListLeases {
  tenant: string;
  /** true: only live leases; false: only units whose lease expired or was released. */
  held?: boolean;
  first: number;
  after?: string;
  /** Whose reads these are. */
  reads?: TableReads;
}

export interface LeasePage {
  leases: { lease: Lease; cursor: string }[];
  /** A page may hold fewer than `first` units (none, even) and still have a next one: see listing-pages.ts. */
  hasNextPage: boolean;
  /** Where the next page starts (`after`); null when nothing follows. */
  endCursor: string | null;
}

const index = indexes.runsByTenant;
const order: ListingOrder<Lease> = { sortKey: (item) => String(item[index.sk]), precedes: (a, b) => a < b, decode: toLease };

/** One shard of the units after `from`, by id, as a page reads it. */
function shardPage({ doc, tableName, now }: StoreDeps, { tenant, held, reads }: ListLeases, shard: number, from: string) {
  const at = now().getTime();
  const filtered = held !== undefined;
  return new ShardReader(metered(doc, reads), {
    input: {
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
    },
    sortKey: index.sk,
    filtered,
    // Rows past their retention are gone, though DynamoDB deletes them late.
    keep: (item) => !pastTtl(item, at),
  });
}

export function createLeaseListing(deps: StoreDeps) {
  return {
    /** @throws InvalidInput for an `after` this listing did not hand out */
    async list(query: ListLeases): Promise<LeasePage> {
      const positions = decodePositions(query.after, 200) ?? startPositions();
      const readers = positions.map((from, shard) => (from === null ? undefined : shardPage(deps, query, shard, from)));
      const page = await mergeShards(readers, positions, query.first, order);
      return {
        leases: page.entries.map(({ node, cursor }) => ({ lease: node, cursor })),
        hasNextPage: page.hasNextPage,
        endCursor: page.endCursor,
      };
    },
  };
}

export type LeaseListing = ReturnType<typeof createLeaseListing>;
