/**
 * Listing a tenant's runs, newest first. Each tenant's runs are spread over RUN_LIST_SHARDS
 * partition keys of a GSI (all runs, or runs by status), so no listing key runs hot; a page
 * queries every shard and merges them (listing-pages.ts). The cursor holds each shard's position.
 * GSIs are eventually consistent: a run created a moment ago may be missing for a moment.
 */
import type { Run, RunStatus } from '../../domain/run.ts';
import { toRun } from '../../table/codec.ts';
import { indexes } from '../../table/definition.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { type ListingOrder, mergeShards, ShardReader } from '../listing-pages.ts';
import { metered, type TableReads } from '../reads.ts';
import { decodePositions, type ShardPositions, startPositions } from '../shard-cursor.ts';

export interface ListRuns {
  tenant: string;
  status?: RunStatus;
  first: number;
  /** Where the previous page ended: a cursor this listing handed out. */
  after?: string;
  /** Whose reads these are. */
  reads?: TableReads;
}

export interface RunPage {
  runs: { run: Run; cursor: string }[];
  /** A page may hold fewer than `first` runs (none, even) and still have a next one: see listing-pages.ts. */
  hasNextPage: boolean;
  /** Where the next page starts (`after`); null when nothing follows. */
  endCursor: string | null;
}

/** One shard of the runs before `from`, newest first, as a page reads it. */
function shardPage({ doc, tableName, now }: StoreDeps, { tenant, status, reads }: ListRuns, shard: number, from: string) {
  const index = status ? indexes.runsByStatus : indexes.runsByTenant;
  const pk = status ? keys.runStatusShard(tenant, status, shard) : keys.runShard(tenant, shard);
  const at = now().getTime();
  return new ShardReader(metered(doc, reads), {
    input: {
      TableName: tableName,
      IndexName: index.name,
      KeyConditionExpression: from ? '#pk = :pk AND #sk < :from' : '#pk = :pk',
      ExpressionAttributeNames: { '#pk': index.pk, ...(from ? { '#sk': index.sk } : {}) },
      ExpressionAttributeValues: { ':pk': pk, ...(from ? { ':from': from } : {}) },
      ScanIndexForward: false,
    },
    sortKey: index.sk,
    filtered: false,
    // Finished runs past their retention are gone, though DynamoDB deletes them late.
    keep: (item) => !pastTtl(item, at),
  });
}

export function createRunListing(deps: StoreDeps) {
  return {
    /** @throws InvalidInput for an `after` this listing did not hand out */
    async list(query: ListRuns): Promise<RunPage> {
      const positions: ShardPositions = decodePositions(query.after, 300) ?? startPositions();
      const index = query.status ? indexes.runsByStatus : indexes.runsByTenant;
      const order: ListingOrder<Run> = { sortKey: (item) => String(item[index.sk]), precedes: (a, b) => a > b, decode: toRun };
      const readers = positions.map((from, shard) => (from === null ? undefined : shardPage(deps, query, shard, from)));
      const page = await mergeShards(readers, positions, query.first, order);
      return {
        runs: page.entries.map(({ node, cursor }) => ({ run: node, cursor })),
        hasNextPage: page.hasNextPage,
        endCursor: page.endCursor,
      };
    },
  };
}

export type RunListing = ReturnType<typeof createRunListing>;
