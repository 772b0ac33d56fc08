/** Reading a run's events a page at a time, in seq order or newest first, filtered by type. */
import { MAX_INT } from '../../domain/limits.ts';
import type { RunEvent } from '../../domain/run.ts';
import { attr, eventBytes, toEvent } from '../../table/codec.ts';
import { eventSk, keys } from '../../table/keys.ts';
import type { ResponseLimit, StoreDeps } from '../deps.ts';
import { mergedEvents } from './merge.ts';

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
  /** Stop after one DynamoDB request (at most 1 MB read), even with fewer events than `limit`. */
  singleRequest?: boolean;
  /** Charged with the size of what the page hands back (throws when it is spent). */
  responseLimit?: ResponseLimit;
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
  ProjectionExpression: 'pk, sk, #type, #payload, #createdAt',
  ExpressionAttributeNames: { '#type': attr.type, '#payload': attr.payload, '#createdAt': attr.createdAt },
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

/**
 * A page of events in seq order (or newest first), filtered by type; `more` tells whether any
 * follow. Over a run's event shards, one Query each in parallel, merged by seq.
 */
export async function pageEvents({ doc, tableName }: StoreDeps, query: EventPageQuery & { shards: number }) {
  const { tenant, runId, after, before, limit, forward = true, types, consistent = false, singleRequest, responseLimit, shards } = query;
  const from = eventSk(Math.min((after ?? 0) + 1, MAX_INT));
  const to = eventSk(Math.max((before ?? MAX_INT + 1) - 1, 0));
  if (from > to) return { events: [] as RunEvent[], more: false };
  const { filter, values } = typeFilter(types);
  const { items, exhausted } = await mergedEvents(
    { doc },
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
      singleRequest,
    },
  );
  const events = items.map(toEvent);
  // What the page hands back is charged (the one read past `limit` only tells whether more follow).
  responseLimit?.spend(events.slice(0, limit).reduce((bytes, event) => bytes + eventBytes(event), 0));
  return { events: events.slice(0, limit), more: events.length > limit || !exhausted };
}
