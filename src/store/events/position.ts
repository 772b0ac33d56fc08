/**
 * Where a run's events end, and whether the run is there to append to: read from the table,
 * and remembered a while in this process so that most appends read neither. What is
 * remembered is a hint: a write at a seq another writer took fails its condition, and the
 * end is read again.
 */
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { RunNotFound } from '../../domain/errors.ts';
import { TtlCache } from '../../lib/ttl-cache.ts';
import { attr, toEvent } from '../../table/codec.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
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
  /** The last seq this process saw per run. */
  const lastSeqHints = new TtlCache<string, number>({ max: MAX_REMEMBERED_RUNS, ttlMs: REMEMBER_MS, now: clock });

  /** The run's last seq as last seen here, if seen lately. */
  const hint = (tenant: string, runId: string) => lastSeqHints.get(runKey(tenant, runId));

  /** `read`: the seq was read from the table (authoritative), not merely written by us. */
  function remember(tenant: string, runId: string, seq: number, read = false) {
    if (!read && (hint(tenant, runId) ?? 0) > seq) return;
    lastSeqHints.set(runKey(tenant, runId), seq);
  }

  /** The run's highest seq (0 for none), strongly consistent. */
  async function lastSeq(tenant: string, runId: string) {
    const { Items = [] } = await doc.send(
      new QueryCommand({
        TableName: tableName,
        ...eventRange(tenant, runId),
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
        ProjectionExpression: 'sk',
      }),
    );
    const last = Items[0] ? toEvent(Items[0]).seq : 0;
    remember(tenant, runId, last, true);
    return last;
  }

  /** @throws RunNotFound unless the run exists and has not expired */
  async function ensureRun(tenant: string, runId: string) {
    if (knownRuns.get(runKey(tenant, runId))) return;
    const { Item } = await doc.send(
      new GetCommand({
        TableName: tableName,
        Key: keys.run(tenant, runId),
        ConsistentRead: true,
        ProjectionExpression: 'pk, #ttl',
        ExpressionAttributeNames: { '#ttl': attr.ttl },
      }),
    );
    // A finished run past its retention is gone, though DynamoDB deletes it late.
    if (!Item || pastTtl(Item, clock())) throw new RunNotFound(runId);
    knownRuns.set(runKey(tenant, runId), true);
  }

  /** Where the next append goes: after the last seq seen lately, or read now. */
  const nextSeq = async (tenant: string, runId: string) => (hint(tenant, runId) ?? (await lastSeq(tenant, runId))) + 1;

  return { hint, remember, lastSeq, ensureRun, nextSeq };
}

export type Positions = ReturnType<typeof createPositions>;
