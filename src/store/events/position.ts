/**
 * Where a run's events end, whether the run is there to append to, and over how many event
 * shards its events are spread: read from the table, and remembered a while in this process so
 * that most appends read none of it. The last seq is a hint: a write at a seq another writer
 * took fails its condition, and the end is read again. The shard count never changes.
 */
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { RunNotFound } from '../../domain/errors.ts';
import { TtlCache } from '../../lib/ttl-cache.ts';
import { attr } from '../../table/attributes.ts';
import { eventShardsOf, toEvent } from '../../table/codec.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { metered, type TableReads } from '../reads.ts';
import { eventRange } from './page.ts';

/** How long a run's existence and last seq are trusted without reading them again. */
const REMEMBER_MS = 60_000;
/** Runs remembered in each cache; past it the run remembered longest ago is forgotten (its next append reads again). */
const MAX_REMEMBERED_RUNS = 10_000;

const runKey = (tenant: string, runId: string) => `${tenant}\u0000${runId}`;

export function createPositions({ doc, tableName, now }: StoreDeps) {
  const clock = () => now().getTime();
  /** Runs known to exist (re-checked after a while: a run expires eventually). */
  const knownRuns = new TtlCache<string, true>({ max: MAX_REMEMBERED_RUNS, ttlMs: REMEMBER_MS, now: clock });
  /** Runs' event shard counts (fixed for a run's life; forgotten after a while all the same, in case its id is used again). */
  const shardCounts = new TtlCache<string, number>({ max: MAX_REMEMBERED_RUNS, ttlMs: REMEMBER_MS, now: clock });
  /** The last seq this process saw per run. */
  const lastSeqHints = new TtlCache<string, number>({ max: MAX_REMEMBERED_RUNS, ttlMs: REMEMBER_MS, now: clock });

  /** The run's last seq as last seen here, if seen lately. */
  const hint = (tenant: string, runId: string) => lastSeqHints.get(runKey(tenant, runId));

  /** `read`: the seq was read from the table (authoritative), not merely written by us. */
  function remember(tenant: string, runId: string, seq: number, read = false) {
    if (!read && (hint(tenant, runId) ?? 0) > seq) return;
    lastSeqHints.set(runKey(tenant, runId), seq);
  }

  /** The run's metadata row as appends need it, strongly consistent; undefined when absent or expired. */
  async function readMeta(tenant: string, runId: string, reads?: TableReads) {
    const { Item } = await metered(doc, reads).send(
      new GetCommand({
        TableName: tableName,
        Key: keys.run(tenant, runId),
        ConsistentRead: true,
        ProjectionExpression: 'pk, #ttl, #shards',
        ExpressionAttributeNames: { '#ttl': attr.ttl, '#shards': attr.eventShards },
      }),
    );
    // A finished run past its retention is gone, though DynamoDB deletes it late.
    if (!Item || pastTtl(Item, clock())) return undefined;
    const shards = eventShardsOf(Item);
    shardCounts.set(runKey(tenant, runId), shards);
    return shards;
  }

  /** The run's event shard count, if this process knows it already. */
  const knownShards = (tenant: string, runId: string) => shardCounts.get(runKey(tenant, runId));

  /** The run's event shard count (1 for a run that does not exist: it has no events anywhere). */
  const shardsOf = async (tenant: string, runId: string, reads?: TableReads) =>
    knownShards(tenant, runId) ?? (await readMeta(tenant, runId, reads)) ?? 1;

  /** The run's highest seq (0 for none), strongly consistent: the last event of each shard, read in parallel. */
  async function lastSeq(tenant: string, runId: string, shards?: number, reads?: TableReads) {
    const partitions = keys.eventPartitions(tenant, runId, shards ?? (await shardsOf(tenant, runId, reads)));
    const reader = metered(doc, reads);
    const lasts = await Promise.all(
      partitions.map(async (pk) => {
        const { Items = [] } = await reader.send(
          new QueryCommand({
            TableName: tableName,
            ...eventRange(pk),
            ScanIndexForward: false,
            Limit: 1,
            ConsistentRead: true,
            ProjectionExpression: 'pk, sk',
          }),
        );
        return Items[0] ? toEvent(Items[0]).seq : 0;
      }),
    );
    const last = Math.max(0, ...lasts);
    remember(tenant, runId, last, true);
    return last;
  }

  /**
   * @returns the run's event shard count
   * @throws RunNotFound unless the run exists and has not expired
   */
  async function ensureRun(tenant: string, runId: string, reads?: TableReads) {
    const shards = knownRuns.get(runKey(tenant, runId)) ? knownShards(tenant, runId) : undefined;
    if (shards !== undefined) return shards;
    const found = await readMeta(tenant, runId, reads);
    if (found === undefined) throw new RunNotFound(runId);
    // Only an append's own check makes the run known to exist (a read for its shard count may be older than its expiry).
    knownRuns.set(runKey(tenant, runId), true);
    return found;
  }

  /** Where the next append goes: after the last seq seen lately, or read now. */
  const nextSeq = async (tenant: string, runId: string, shards: number) =>
    (hint(tenant, runId) ?? (await lastSeq(tenant, runId, shards))) + 1;

  const rememberShards = (tenant: string, runId: string, shards: number) => shardCounts.set(runKey(tenant, runId), shards);

  return { hint, remember, lastSeq, ensureRun, nextSeq, knownShards, shardsOf, rememberShards };
}

export type Positions = ReturnType<typeof createPositions>;
