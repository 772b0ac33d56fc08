/**
 * Reading a run's events over its event shards: one Query per shard partition, sent in
 * parallel, merged by seq. Each shard's events are in seq order, so the next event of the run
 * is the least head among the shards; a shard whose read items are all handed out, read to a
 * seq before that head, is read further first (it may hold an earlier seq). A run of one shard
 * is its one Query.
 *
 * Each shard is read at most `maxPages` Queries per page (a filter may drop most of what a
 * Query reads). A shard stopped there bounds the page: nothing past the seq it was read to is
 * handed out (it may hold an earlier one), and the page says where to go on from.
 */
import type { QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Item } from '../../table/attributes.ts';
import { seqOfSk } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { queryPages } from '../query-pages.ts';

/**
 * Queries one page of events sends per event shard at most. A filter that drops most of what
 * it reads then ends the page early, with the events found and where its read stopped.
 * `Run.events` reads at most MAX_EVENT_SHARDS (domain/limits.ts) times this.
 */
export const EVENT_PAGES_PER_SHARD = 4;

export interface ShardedQuery {
  /** The partitions holding the run's events. */
  partitions: string[];
  /** The Query of one partition, its own Limit aside. */
  query: (pk: string) => Omit<QueryCommandInput, 'ExclusiveStartKey' | 'Limit'>;
  /** Items wanted in all (a page and one more, to tell whether more follow). */
  want: number;
  /** Items read per Query at least (a filter applies after Limit: wider pages for a rare type). */
  minPageItems?: number;
  forward: boolean;
  /** Queries per shard at most (EVENT_PAGES_PER_SHARD by default). */
  maxPages?: number;
}

export interface MergedEvents {
  /** In seq order (newest first when not forward). */
  items: Item[];
  /** Every shard was read to its end and nothing read is left. */
  exhausted: boolean;
  /**
   * When a shard's Queries ran out before `want` items were found: the seq every shard was read
   * to (past it, newest first). Every matching event up to it is in `items`; the next page goes
   * on after it (before it, newest first).
   */
  readTo?: number;
}

interface Cursor {
  pages: AsyncGenerator<{ Items?: Item[]; LastEvaluatedKey?: Record<string, unknown> }>;
  held: Item[];
  done: boolean;
  queries: number;
  /** The seq of the last row its Queries went over (matching or not). */
  readTo: number;
}

const seqOf = (item: Item) => seqOfSk(String(item.sk)) ?? 0;

/** Up to `want` items in seq order (or newest first), read with at most `maxPages` Queries per shard. */
export async function mergedEvents({ doc }: Pick<StoreDeps, 'doc'>, sharded: ShardedQuery): Promise<MergedEvents> {
  const { partitions, query, want, minPageItems = 0, forward, maxPages = EVENT_PAGES_PER_SHARD } = sharded;
  // Consecutive seqs are spread evenly: a shard's share of a page, and one more so it is not read dry first.
  const perShard = partitions.length === 1 ? want : Math.ceil(want / partitions.length) + 1;
  const Limit = Math.max(perShard, Math.ceil(minPageItems / partitions.length));
  const cursors: Cursor[] = partitions.map((pk) => ({
    pages: queryPages(doc, { ...query(pk), Limit }),
    held: [],
    done: false,
    queries: 0,
    readTo: 0,
  }));
  const read = async (cursor: Cursor) => {
    cursor.queries++;
    const next = await cursor.pages.next();
    if (next.done) {
      cursor.done = true;
      return;
    }
    cursor.held.push(...(next.value.Items ?? []));
    const last = next.value.LastEvaluatedKey;
    if (last) cursor.readTo = seqOfSk(String(last.sk)) ?? 0;
    else cursor.done = true;
  };
  /** Whether seq `a` comes before `b` in the page's order. */
  const before = (a: number, b: number) => (forward ? a < b : a > b);
  await Promise.all(cursors.map(read));
  const items: Item[] = [];
  while (items.length < want) {
    let best: Cursor | undefined;
    for (const cursor of cursors) {
      const head = cursor.held[0];
      if (head && (!best || before(seqOf(head), seqOf(best.held[0] as Item)))) best = cursor;
    }
    const headSeq = best ? seqOf(best.held[0] as Item) : undefined;
    // Shards read dry that may still hold a seq before the head (any seq, with no head left).
    const behind = cursors.filter((c) => !c.done && c.held.length === 0 && (headSeq === undefined || before(c.readTo, headSeq)));
    if (behind.length === 0) {
      if (!best) return { items, exhausted: true };
      items.push(best.held.shift() as Item);
      continue;
    }
    const readable = behind.filter((cursor) => cursor.queries < maxPages);
    if (readable.length === 0) {
      // Stopped: every shard was read at least to the one read least far, and all it held up to there is handed out.
      const readTo = behind.map((cursor) => cursor.readTo).reduce((a, b) => (before(a, b) ? a : b));
      return { items, exhausted: false, readTo };
    }
    await Promise.all(readable.map(read));
  }
  return { items, exhausted: cursors.every((cursor) => cursor.done && cursor.held.length === 0) };
}
