/**
 * Listing a tenant's runs, newest first. Each tenant's runs are spread over RUN_LIST_SHARDS
 * partition keys of a GSI (all runs, or runs by status), so no listing key runs hot; a page
 * queries every shard and merges them. The cursor holds each shard's position.
 * GSIs are eventually consistent: a run created a moment ago may be missing for a moment.
 */
import type { Run, RunStatus } from '../../domain/run.ts';
import { type Item, toRun } from '../../table/codec.ts';
import { indexes } from '../../table/definition.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { queryPages } from '../query-pages.ts';
import { decodePositions, encodePositions, type ShardPositions, startPositions } from '../shard-cursor.ts';

export interface ListRuns {
  tenant: string;
  status?: RunStatus;
  first: number;
  /** Where the previous page ended: a cursor this listing handed out. */
  after?: string;
}

export interface RunPage {
  runs: { run: Run; cursor: string }[];
  hasNextPage: boolean;
}

type ShardPage = Awaited<ReturnType<typeof shardPage>>;

/** Up to `limit` runs of one shard after `from`, newest first; also whether the shard has more. */
async function shardPage({ doc, tableName, now }: StoreDeps, { tenant, status }: ListRuns, shard: number, from: string, limit: number) {
  const index = status ? indexes.runsByStatus : indexes.runsByTenant;
  const pk = status ? keys.runStatusShard(tenant, status, shard) : keys.runShard(tenant, shard);
  const items: Item[] = [];
  let more = false;
  const pages = queryPages(doc, {
    TableName: tableName,
    IndexName: index.name,
    KeyConditionExpression: from ? '#pk = :pk AND #sk < :from' : '#pk = :pk',
    ExpressionAttributeNames: { '#pk': index.pk, ...(from ? { '#sk': index.sk } : {}) },
    ExpressionAttributeValues: { ':pk': pk, ...(from ? { ':from': from } : {}) },
    ScanIndexForward: false,
    Limit: limit + 1,
  });
  for await (const page of pages) {
    // Finished runs past their retention are gone, though DynamoDB deletes them late.
    items.push(...(page.Items ?? []).filter((item) => !pastTtl(item, now().getTime())));
    more = page.LastEvaluatedKey !== undefined;
    if (items.length > limit) break;
  }
  return {
    items: items.slice(0, limit),
    more: items.length > limit || more,
    sortKey: (item: Item) => String(item[index.sk]),
  };
}

/** Merges the shards' pages newest first, up to `first` runs; each run handed out moves its shard's position past it. */
function merge(shards: (ShardPage | undefined)[], positions: ShardPositions, first: number): RunPage {
  const heads = shards.map(() => 0);
  const current = [...positions];
  const runs: { run: Run; cursor: ShardPositions }[] = [];
  while (runs.length < first) {
    let best = -1;
    let bestKey = '';
    shards.forEach((page, shard) => {
      const item = page?.items[heads[shard] as number];
      if (item && (best < 0 || page.sortKey(item) > bestKey)) {
        best = shard;
        bestKey = page.sortKey(item);
      }
    });
    if (best < 0) break;
    const page = shards[best] as ShardPage;
    const item = page.items[heads[best] as number] as Item;
    heads[best] = (heads[best] as number) + 1;
    current[best] = bestKey;
    runs.push({ run: toRun(item), cursor: [...current] });
  }
  // A shard with nothing left (read to its end and all handed out) is done.
  const finalPositions = current.map((position, shard) => {
    const page = shards[shard];
    if (!page) return null;
    return !page.more && heads[shard] === page.items.length ? null : position;
  });
  const last = runs.at(-1);
  if (last) last.cursor = finalPositions;
  return {
    runs: runs.map(({ run, cursor }) => ({ run, cursor: encodePositions(cursor) })),
    hasNextPage: finalPositions.some((position) => position !== null),
  };
}

export function createRunListing(deps: StoreDeps) {
  return {
    /** @throws InvalidInput for an `after` this listing did not hand out */
    async list(query: ListRuns): Promise<RunPage> {
      const positions: ShardPositions = decodePositions(query.after, 300) ?? startPositions();
      const shards = await Promise.all(
        positions.map((from, shard) => (from === null ? undefined : shardPage(deps, query, shard, from, query.first))),
      );
      return merge(shards, positions, query.first);
    },
  };
}

export type RunListing = ReturnType<typeof createRunListing>;
