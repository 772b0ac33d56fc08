/**
 * A page of a tenant-wide listing (runs, leases): each of the tenant's RUN_LIST_SHARDS index
 * partitions read from its position in the cursor, at most LISTING_PAGES_PER_SHARD Queries
 * each, then merged in the listing's order. A filter (a FilterExpression, or rows past their
 * TTL dropped here) may drop most of what a Query reads: a shard whose Queries ran out says how
 * far it read, no row past that is handed out from another shard (it may hold an earlier one),
 * and the cursor takes it on from there. Such a page may hold fewer rows than asked, or none,
 * and still have a next page.
 */
import { QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Item } from '../table/attributes.ts';
import type { Documents } from '../table/documents.ts';
import { RUN_LIST_SHARDS } from '../table/keys.ts';
import { encodePositions, type ShardPositions } from './shard-cursor.ts';

/** Index partitions a listing page reads (a tenant's runs, runs in a status, units). */
export const LISTING_SHARDS = RUN_LIST_SHARDS;

/**
 * Queries a listing page sends per shard at most: `Query.runs` and `Query.leases` read at most
 * LISTING_SHARDS times this. When a filter drops most rows, the page ends there with what it found.
 */
export const LISTING_PAGES_PER_SHARD = 4;

/** Rows a Query reads when a filter may drop some: from the first with a FilterExpression, else after a first that was too short. */
const FILTERED_QUERY_ROWS = 100;

export interface ScanShard {
  /** The Query of the shard from its position, its Limit and start aside. */
  input: Omit<QueryCommandInput, 'Limit' | 'ExclusiveStartKey'>;
  /** The index's sort key attribute. */
  sortKey: string;
  /** Whether the Query has a FilterExpression. */
  filtered: boolean;
  /** Rows kept (those the Query's filter passed). */
  keep: (item: Item) => boolean;
}

/**
 * One shard as a page reads it: a Query for its share of the page first, then more only if the
 * merge hands all of that out and still wants rows (runs are spread evenly over the shards, so a
 * page of N reads about N rows, not N from each shard).
 */
export class ShardReader {
  /** Rows kept so far, in the listing's order. */
  readonly items: Item[] = [];
  private start: Record<string, unknown> | undefined;
  private queries = 0;
  private ended = false;

  constructor(
    private readonly doc: Documents,
    private readonly shard: ScanShard,
  ) {}

  /** Whether the shard holds more than what was read (its last Query stopped short of its end). */
  get more() {
    return !this.ended;
  }

  /** Whether another Query may be sent for this page. */
  get canRead() {
    return !this.ended && this.queries < LISTING_PAGES_PER_SHARD;
  }

  /** When its Queries ran out short of its end: the sort key it read to (every row up to it is in `items`). */
  get readTo(): string | undefined {
    return this.more && !this.canRead ? String(this.start?.[this.shard.sortKey]) : undefined;
  }

  /** One more Query, for about `rows` rows (and one more, to tell whether more follow; wider once rows may be dropped). */
  async read(rows: number) {
    const Limit = this.shard.filtered || this.queries > 0 ? Math.max(rows + 1, FILTERED_QUERY_ROWS) : rows + 1;
    this.queries++;
    const page = await this.doc.send(new QueryCommand({ ...this.shard.input, Limit, ExclusiveStartKey: this.start }));
    this.items.push(...(page.Items ?? []).filter(this.shard.keep));
    this.start = page.LastEvaluatedKey;
    if (!this.start) this.ended = true;
  }
}

export interface ListingPage<T> {
  entries: { node: T; cursor: string }[];
  hasNextPage: boolean;
  /** Where the next page starts: the last entry's cursor, or with none, where the shards were read to (null: nothing follows). */
  endCursor: string | null;
}

export interface ListingOrder<T> {
  sortKey: (item: Item) => string;
  /** Whether sort key `a` comes before `b` in the listing. */
  precedes: (a: string, b: string) => boolean;
  decode: (item: Item) => T;
}

/**
 * Merges the shards' rows in the listing's order, up to `first`, reading each for its share first
 * and further only while the page needs its rows; each row handed out moves its shard's position
 * past it, and a shard whose rows are all handed out goes on from where it was read to.
 */
export async function mergeShards<T>(
  readers: (ShardReader | undefined)[],
  positions: ShardPositions,
  first: number,
  order: ListingOrder<T>,
): Promise<ListingPage<T>> {
  await Promise.all(readers.map((reader) => reader?.read(Math.ceil(first / LISTING_SHARDS))));
  const heads = readers.map(() => 0);
  const current = [...positions];
  const entries: { node: T; cursor: ShardPositions }[] = [];
  const handedOut = (shard: number) => heads[shard] === readers[shard]?.items.length;
  while (entries.length < first) {
    // A shard whose rows are all handed out may hold the next one: read on before choosing.
    const dry = readers.filter((reader, shard): reader is ShardReader => !!reader && handedOut(shard) && reader.canRead);
    if (dry.length > 0) {
      await Promise.all(dry.map((reader) => reader.read(first - entries.length)));
      continue;
    }
    let best = -1;
    let bestKey = '';
    readers.forEach((reader, shard) => {
      const item = reader?.items[heads[shard] as number];
      if (item && (best < 0 || order.precedes(order.sortKey(item), bestKey))) {
        best = shard;
        bestKey = order.sortKey(item);
      }
    });
    if (best < 0) break;
    // A shard read dry short of this row may hold one before it: the page ends here.
    const short = readers.some((reader, shard) => {
      const readTo = reader?.readTo;
      return readTo !== undefined && handedOut(shard) && order.precedes(readTo, bestKey);
    });
    if (short) break;
    const item = (readers[best] as ShardReader).items[heads[best] as number] as Item;
    heads[best] = (heads[best] as number) + 1;
    current[best] = bestKey;
    entries.push({ node: order.decode(item), cursor: [...current] });
  }
  const final = current.map((position, shard) => {
    const reader = readers[shard];
    if (!reader) return null;
    if (!handedOut(shard)) return position;
    // All handed out: done when read to its end, else on from where it was read to.
    return reader.readTo ?? (reader.more ? position : null);
  });
  const hasNextPage = final.some((position) => position !== null);
  const last = entries.at(-1);
  if (last) last.cursor = final;
  return {
    entries: entries.map(({ node, cursor }) => ({ node, cursor: encodePositions(cursor) })),
    hasNextPage,
    endCursor: last || hasNextPage ? encodePositions(final) : null,
  };
}
