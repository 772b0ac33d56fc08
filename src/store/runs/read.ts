/**
 * Reading a run: its metadata alone, or metadata, budget and first events from ONE Query on its
 * partition; a run of several event shards takes one Query more per shard, in parallel with
 * it once the shard count is known here (else after it), merged by seq.
 */
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { RunNotFound } from '../../domain/errors.ts';
import type { Budget, Run, RunClaim, RunEvent } from '../../domain/run.ts';
import type { Item } from '../../table/attributes.ts';
import { eventBytes, toBudget, toClaim, toEvent, toRun } from '../../table/codec.ts';
import { keys, RUN_BUDGET_SK, RUN_CLAIM_SK, RUN_META_SK } from '../../table/keys.ts';
import type { ResponseLimit, StoreDeps } from '../deps.ts';
import { mergedEvents } from '../events/merge.ts';
import { eventRange } from '../events/page.ts';
import { pastTtl } from '../expiry.ts';
import { metered, type TableReads } from '../reads.ts';
import type { EventLayout } from './index.ts';

/** A run as one Query on its partition finds it. */
export interface RunSnapshot {
  run: Run;
  budget: Budget | null;
  /** Its claim row as stored (null: never claimed); whether it is live is the reader's to judge by the clock. */
  claim: RunClaim | null;
  /** The run's first events, in seq order. */
  events: RunEvent[];
  /** Whether the run has more events than `events`. */
  moreEvents: boolean;
}

export interface SnapshotOptions {
  consistent?: boolean;
  eventLimit: number;
  responseLimit?: ResponseLimit;
  /** Whose reads these are (a request's, a feed's). */
  reads?: TableReads;
}

export function createRunReads({ doc, tableName, now }: StoreDeps, layout: Pick<EventLayout, 'knownShards' | 'rememberShards'>) {
  /** The row, unless it is absent or past its TTL. */
  const live = (item: Item | undefined) => (item && !pastTtl(item, now().getTime()) ? item : undefined);

  /** The run's metadata row, strongly consistent; undefined when the run does not exist. */
  async function meta(tenant: string, runId: string) {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.run(tenant, runId), ConsistentRead: true }));
    return live(Item);
  }

  /** The first `want` events over the run's event shards, merged by seq. */
  const shardedEvents = (tenant: string, runId: string, shards: number, want: number, consistent: boolean, reads?: TableReads) =>
    mergedEvents(
      { doc: metered(doc, reads) },
      {
        partitions: keys.eventPartitions(tenant, runId, shards),
        query: (pk) => ({ TableName: tableName, ...eventRange(pk), ConsistentRead: consistent }),
        want,
        forward: true,
      },
    );

  /**
   * Metadata, budget and up to `eventLimit` first events, from ONE Query (and one per event
   * shard, in parallel); null when the run does not exist.
   */
  async function snapshot(
    tenant: string,
    runId: string,
    options: SnapshotOptions,
    known = layout.knownShards(tenant, runId),
  ): Promise<RunSnapshot | null> {
    const { consistent = false, eventLimit, responseLimit, reads } = options;
    const sharded = known !== undefined && known > 1 ? shardedEvents(tenant, runId, known, eventLimit + 1, consistent, reads) : undefined;
    // Unclaimed if the run turns out not to exist.
    sharded?.catch(() => undefined);
    const { Items = [], LastEvaluatedKey } = await metered(doc, reads).send(
      new QueryCommand({
        TableName: tableName,
        // Head rows, then events; output rows sort after the last event and are not read here.
        KeyConditionExpression: 'pk = :pk AND sk <= :lastEvent',
        ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId), ':lastEvent': keys.events.last },
        ConsistentRead: consistent,
        // Budget, claim and metadata sort first; one more event than asked tells whether more follow.
        Limit: 3 + (sharded ? 0 : eventLimit + 1),
      }),
    );
    const metaRow = live(Items.find((item) => item.sk === RUN_META_SK));
    if (!metaRow) return null;
    const run = toRun(metaRow);
    layout.rememberShards(tenant, runId, run.eventShards);
    // Remembered of another run of that id (the old one deleted since): read again, trusting nothing.
    if (sharded && run.eventShards !== known) return snapshot(tenant, runId, options, 0);
    const budget = Items.find((item) => item.sk === RUN_BUDGET_SK);
    const claim = toClaim(Items.find((item) => item.sk === RUN_CLAIM_SK));
    let eventItems = Items.filter((item) => String(item.sk).startsWith('evt#'));
    // A page stops at 1 MB too: then more may follow even with fewer events than asked.
    let more = LastEvaluatedKey !== undefined;
    if (run.eventShards > 1) {
      const merged = await (sharded ?? shardedEvents(tenant, runId, run.eventShards, eventLimit + 1, consistent, reads));
      eventItems = merged.items;
      more = !merged.exhausted;
    }
    const events = eventItems.map(toEvent);
    responseLimit?.spend(events.slice(0, eventLimit).reduce((bytes, event) => bytes + eventBytes(event), 0));
    return {
      run,
      budget: budget ? toBudget(budget) : null,
      claim,
      events: events.slice(0, eventLimit),
      moreEvents: events.length > eventLimit || more,
    } satisfies RunSnapshot;
  }

  /** The run as it is now. @throws RunNotFound when it is gone (never a run decoded from nothing) */
  async function current(tenant: string, runId: string): Promise<Run> {
    const row = await meta(tenant, runId);
    if (!row) throw new RunNotFound(runId);
    return toRun(row);
  }

  return { live, meta, snapshot, current };
}

export type RunReads = ReturnType<typeof createRunReads>;
