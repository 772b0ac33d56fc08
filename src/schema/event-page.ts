/**
 * A page of a run's events for `Run.events`. Relay paging written out here rather than with
 * Pothos' resolveCursorConnection: the first page often comes with the run's own Query (read
 * with it, its `more` already known), and afterSeq and types narrow pages the helper does not
 * know of; the cursors are the seq they point at.
 */
import { DEFAULT_PAGE_SIZE } from '../domain/limits.ts';
import type { RunEvent } from '../domain/run.ts';
import type { Context } from './context.ts';
import { badInput } from './error-codes.ts';
import { eventCursor, seqOfCursor } from './event.ts';
import type { RunParent } from './run.ts';

export interface EventPageArgs {
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
  afterSeq?: number | null;
  types?: readonly string[] | null;
}

/** The first page as read with the run, when it answers this request (forward, from the start, unfiltered, long enough). */
function prefetchedPage({ firstEvents }: RunParent, { after, before, forward, limit, types }: PageRequest) {
  if (!forward || !firstEvents || after !== 0 || before !== undefined || types?.length) return undefined;
  if (limit > firstEvents.events.length && firstEvents.more) return undefined;
  return { events: firstEvents.events.slice(0, limit), more: firstEvents.more || firstEvents.events.length > limit };
}

interface PageRequest {
  after: number;
  before: number | undefined;
  forward: boolean;
  limit: number;
  types: readonly string[] | undefined;
}

function pageRequest(args: EventPageArgs, maxPageSize: number): PageRequest {
  if (args.first != null && args.last != null) throw badInput('events: pass first or last, not both');
  for (const [name, value] of [
    ['first', args.first],
    ['last', args.last],
  ] as const) {
    if (value != null && (value < 0 || value > maxPageSize)) {
      throw badInput(`events.${name}: must be from 0 to ${maxPageSize} (RUNPLANE_MAX_PAGE_SIZE)`);
    }
  }
  const forward = args.last == null;
  return {
    after: Math.max(args.afterSeq ?? 0, seqOfCursor(args.after, 'events.after') ?? 0),
    before: seqOfCursor(args.before, 'events.before'),
    forward,
    limit: (forward ? args.first : args.last) ?? DEFAULT_PAGE_SIZE,
    types: args.types ?? undefined,
  };
}

export async function eventPage(parent: RunParent, args: EventPageArgs, { tenant, stores, limits, response, reads }: Context) {
  const request = pageRequest(args, limits.maxPageSize);
  const { after, before, forward, limit, types } = request;
  let page: { events: RunEvent[]; more: boolean; readTo?: number } | undefined = prefetchedPage(parent, request);
  if (!page) {
    page = await stores.events.page({
      tenant,
      runId: parent.run.id,
      after,
      before,
      limit,
      forward,
      types,
      consistent: parent.consistent,
      responseLimit: response,
      reads,
    });
    if (!forward) page.events.reverse();
  }
  const edges = page.events.map((event) => ({ cursor: eventCursor(event.seq), node: event }));
  // A page whose reads ran out goes on from where they stopped (past its last event, or with none).
  const readTo = page.readTo === undefined ? null : eventCursor(page.readTo);
  return {
    edges,
    pageInfo: {
      hasNextPage: forward ? page.more : before !== undefined,
      hasPreviousPage: forward ? after > 0 : page.more,
      startCursor: (!forward && readTo) || (edges[0]?.cursor ?? null),
      endCursor: (forward && readTo) || (edges.at(-1)?.cursor ?? null),
    },
  };
}
