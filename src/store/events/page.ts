/** Reading a run's events a page at a time, in seq order or newest first, filtered by type. */
import { MAX_INT } from '../../domain/limits.ts';
import type { RunEvent } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { eventBytes, toEvent } from '../../table/codec.ts';
import { eventSk, keys } from '../../table/keys.ts';
import type { ResponseLimit, StoreDeps } from '../deps.ts';
import { metered, type TableReads } from '../reads.ts';
import { EVENT_PAGES_PER_SHARD, mergedEvents } from './merge.ts';

export interface EventPageQuery {
  tenant: string;
  runId: string;
  /** Only events with seq > after. */
  after?: number;
  /** Only events with seq < before. */
  before?: number;
  limit: number;
  /** Newest first when false. */
  forward?: boolean;
  types?: readonly string[];
  consistent?: boolean;
  /** Stop after one DynamoDB request per shard (at most 1 MB read each), even with fewer events than `limit`. */
  singleRequest?: boolean;
  /** Charged with the size of what the page hands back (throws when it is spent). */
  responseLimit?: ResponseLimit;
  /** Whose reads these are (a request's, a feed's). */
  reads?: TableReads;
}

/** The Query key condition for events of one partition with sort keys from `from` to `to` (all of them by default). */
export function eventRange(pk: string, from = keys.events.first, to = keys.events.last) {
  return {
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: { ':pk': pk, ':from': from, ':to': to } as Record<string, unknown>,
  };
}

/**
 * What a page reads of each event: what toEvent decodes (the run and seq from the keys), not the
 * write id and the copies of the run and seq every event row also carries (a third of its bytes,
 * which the engine, the SDK and the codec would each go over).
 */
const EVENT_PROJECTION = {
  ProjectionExpression: 'pk, sk, #type, #payload, #createdAt, #origin',
  ExpressionAttributeNames: { '#type': attr.type, '#payload': attr.payload, '#createdAt': attr.createdAt, '#origin': attr.origin },
};

/** Items read per Query when filtering by type. */
const FILTERED_PAGE = 500;

/** The Query filter keeping only events of the given types (none: every event). */
function typeFilter(types: readonly string[] | undefined) {
  if (!types?.length) return { filter: {}, values: {} };
  return {
    // `#type` is named by the projection.
    filter: { FilterExpression: `#type IN (${types.map((_, i) => `:type${i}`).join(', ')})` },
    values: Object.fromEntries(types.map((t, i) => [`:type${i}`, t])),
  };
}

export interface EventPage {
  events: RunEvent[];
  /** Whether any follow (precede, newest first). */
  more: boolean;
  /**
   * Set when the page's reads ran out (EVENT_PAGES_PER_SHARD per shard) before `limit` events
   * were found, as a filter dropping most of what it reads makes them: the seq the read got to,
   * every event up to it handed out. The next page goes on after it (before it, newest first).
   */
  readTo?: number;
}

/**
 * A page of events in seq order (or newest first), filtered by type; `more` tells whether any
 * follow. Over a run's event shards, one Query each in parallel, merged by seq; at most
 * EVENT_PAGES_PER_SHARD Queries per shard, so a rare type may make a short (even empty) page.
 */
export async function pageEvents({ doc, tableName }: StoreDeps, query: EventPageQuery & { shards: number }): Promise<EventPage> {
  const {
    tenant,
    runId,
    after,
    before,
    limit,
    forward = true,
    types,
    consistent = false,
    singleRequest,
    responseLimit,
    reads,
    shards,
  } = query;
  const from = eventSk(Math.min((after ?? 0) + 1, MAX_INT));
  const to = eventSk(Math.max((before ?? MAX_INT + 1) - 1, 0));
  if (from > to) return { events: [], more: false };
  const { filter, values } = typeFilter(types);
  const { items, exhausted, readTo } = await mergedEvents(
    { doc: metered(doc, reads) },
    {
      partitions: keys.eventPartitions(tenant, runId, shards),
      query: (pk) => {
        const range = eventRange(pk, from, to);
        return {
          TableName: tableName,
          KeyConditionExpression: range.KeyConditionExpression,
          ExpressionAttributeValues: { ...range.ExpressionAttributeValues, ...values },
          ...EVENT_PROJECTION,
          ...filter,
          ScanIndexForward: forward,
          ConsistentRead: consistent,
        };
      },
      // One more than the page tells whether more follow.
      want: limit + 1,
      // A filter applies after Limit: read wider pages so that a rare type costs few requests.
      minPageItems: types?.length ? FILTERED_PAGE : 0,
      forward,
      maxPages: singleRequest ? 1 : EVENT_PAGES_PER_SHARD,
    },
  );
  const events = items.map(toEvent);
  // What the page hands back is charged (the one read past `limit` only tells whether more follow).
  responseLimit?.spend(events.slice(0, limit).reduce((bytes, event) => bytes + eventBytes(event), 0));
  if (events.length > limit) return { events: events.slice(0, limit), more: true };
  return { events, more: !exhausted, ...(readTo !== undefined ? { readTo } : {}) };
}
