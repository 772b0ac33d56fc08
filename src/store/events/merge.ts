/**
 * Reading a run's events over its event shards: one Query per shard partition, sent in
 * parallel, merged by seq. Each shard's events are in seq order, so the next event of the run
 * is the least head among the shards; a shard whose read items are all handed out is read
 * further before anything else is (it may hold the next seq). A run of one shard is its one Query.
 */
import type { QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Item } from '../../table/codec.ts';
import { seqOfSk } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { queryPages } from '../query-pages.ts';

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
  /** One request per shard: stop where the merge could only go on after another. */
  singleRequest?: boolean;
}

interface Cursor {
  pages: AsyncGenerator<{ Items?: Item[]; LastEvaluatedKey?: Record<string, unknown> }>;
  held: Item[];
  done: boolean;
}

const seqOf = (item: Item) => seqOfSk(String(item.sk)) ?? 0;

/**
 * Up to `want` items in seq order (or newest first); `exhausted` when every shard was read to
 * its end and nothing read is left.
 */
export async function mergedEvents({ doc }: Pick<StoreDeps, 'doc'>, sharded: ShardedQuery): Promise<{ items: Item[]; exhausted: boolean }> {
  const { partitions, query, want, minPageItems = 0, forward, singleRequest } = sharded;
  // Consecutive seqs are spread evenly: a shard's share of a page, and one more so it is not read dry first.
  const perShard = partitions.length === 1 ? want : Math.ceil(want / partitions.length) + 1;
  const Limit = Math.max(perShard, Math.ceil(minPageItems / partitions.length));
  const cursors: Cursor[] = partitions.map((pk) => ({ pages: queryPages(doc, { ...query(pk), Limit }), held: [], done: false }));
  const read = async (cursor: Cursor) => {
    const next = await cursor.pages.next();
    if (next.done) {
      cursor.done = true;
      return;
    }
    cursor.held.push(...(next.value.Items ?? []));
    if (!next.value.LastEvaluatedKey) cursor.done = true;
  };
  await Promise.all(cursors.map(read));
  const items: Item[] = [];
  while (items.length < want) {
    const dry = cursors.filter((cursor) => cursor.held.length === 0 && !cursor.done);
    if (dry.length > 0) {
      if (singleRequest) return { items, exhausted: false };
      await Promise.all(dry.map(read));
      continue;
    }
    let best: Cursor | undefined;
    for (const cursor of cursors) {
      const head = cursor.held[0];
      if (!head) continue;
      const ahead = best ? (forward ? seqOf(head) < seqOf(best.held[0] as Item) : seqOf(head) > seqOf(best.held[0] as Item)) : true;
      if (ahead) best = cursor;
    }
    if (!best) return { items, exhausted: true };
    items.push(best.held.shift() as Item);
  }
  return { items, exhausted: cursors.every((cursor) => cursor.done && cursor.held.length === 0) };
}
