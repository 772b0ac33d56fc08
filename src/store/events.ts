/**
 * A run's event stream. An append is a put conditioned on its seq being free; with a
 * cost, the put and the budget charge are one transaction (both or neither).
 */
import { randomUUID } from 'node:crypto';
import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { ContentionExceeded, InvalidInput, RunNotFound, SequenceConflict } from '../domain/errors.ts';
import { MAX_INT } from '../domain/limits.ts';
import type { RunEvent } from '../domain/run.ts';
import { attr, eventItem, toEvent } from '../table/codec.ts';
import { cancellations, conditions, isConditionalCheckFailed, isTransactionCanceled, oldItem } from '../table/conditions.ts';
import { eventSk, keys } from '../table/keys.ts';
import { chargeRefusal, chargeUpdate } from './budgets.ts';
import type { StoreDeps } from './deps.ts';
import { retryConflicts } from './retry.ts';

export interface AppendEvent {
  tenant: string;
  runId: string;
  type: string;
  payload: unknown;
  /** Exactly this seq (optimistic: refused if taken or if it would leave a gap); next free one when absent. */
  seq?: number;
  /** Charged to the run's budget in the same transaction. */
  cost?: number;
}

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
}

/** Collisions tolerated before an append gives up (each one means another writer won a seq). */
const MAX_APPEND_ATTEMPTS = 256;
/** Items read per Query when filtering by type. */
const FILTERED_PAGE = 500;
/** Remembered per run: which runs exist and their last known seq. */
const MAX_REMEMBERED_RUNS = 10_000;

const isItemTooLarge = (err: unknown) => (err as Error)?.name === 'ValidationException' && /Item size/.test((err as Error).message);

export function createEventStore({ doc, tableName, now }: StoreDeps) {
  const knownRuns = new Set<string>();
  const lastSeqHints = new Map<string, number>();
  const remember = (runKey: string, seq: number) => {
    if ((lastSeqHints.get(runKey) ?? 0) >= seq) return;
    lastSeqHints.delete(runKey);
    lastSeqHints.set(runKey, seq);
    if (lastSeqHints.size > MAX_REMEMBERED_RUNS) lastSeqHints.delete(lastSeqHints.keys().next().value as string);
  };

  async function ensureRun(tenant: string, runId: string, runKey: string) {
    if (knownRuns.has(runKey)) return;
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName, Key: keys.run(tenant, runId), ConsistentRead: true, ProjectionExpression: 'pk' }),
    );
    if (!Item) throw new RunNotFound(runId);
    if (knownRuns.size >= MAX_REMEMBERED_RUNS) knownRuns.clear();
    knownRuns.add(runKey);
  }

  /** The run's highest seq (0 for none), strongly consistent. */
  async function lastSeq(tenant: string, runId: string) {
    const { Items = [] } = await doc.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :first AND :last',
        ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId), ':first': keys.events.first, ':last': keys.events.last },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
        ProjectionExpression: 'sk',
      }),
    );
    const last = Items[0] ? toEvent(Items[0]).seq : 0;
    remember(`${tenant}\u0000${runId}`, last);
    return last;
  }

  /** Writes the event if its seq is free; false if another writer has it. */
  async function put(tenant: string, event: RunEvent, cost: number | undefined) {
    const writeId = randomUUID();
    const item = eventItem(tenant, event, writeId);
    if (cost === undefined) {
      try {
        await retryConflicts(() =>
          doc.send(
            new PutCommand({
              TableName: tableName,
              Item: item,
              // A seq is taken once: two writers can never both have it.
              ConditionExpression: conditions.absent,
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            }),
          ),
        );
        return true;
      } catch (err) {
        if (isItemTooLarge(err)) throw new InvalidInput('input.payload', 'is too large to store in one DynamoDB item (400 KB)');
        if (!isConditionalCheckFailed(err)) throw err;
        // The SDK resent our put after a lost response: the seq is ours.
        return oldItem(err)?.[attr.writeId] === writeId;
      }
    }
    const charge = { tenant, runId: event.runId, amount: cost };
    try {
      // The SDK resends a transaction with the same ClientRequestToken: it is applied once.
      await retryConflicts(() =>
        doc.send(
          new TransactWriteCommand({
            TransactItems: [
              { Put: { TableName: tableName, Item: item, ConditionExpression: conditions.absent } },
              { Update: chargeUpdate(tableName, charge, event.createdAt, writeId) },
            ],
          }),
        ),
      );
      return true;
    } catch (err) {
      if (isItemTooLarge(err)) throw new InvalidInput('input.payload', 'is too large to store in one DynamoDB item (400 KB)');
      if (!isTransactionCanceled(err)) throw err;
      const [seqTaken, refused] = cancellations(err);
      if (refused?.conditionFailed) throw chargeRefusal(charge, refused.item);
      if (seqTaken?.conditionFailed) return false;
      throw err;
    }
  }

  return {
    lastSeq,

    /**
     * @throws RunNotFound
     * @throws SequenceConflict for an explicit seq that is taken or would leave a gap
     * @throws BudgetExceeded when a cost would pass the cap (neither event nor charge is written)
     */
    async append({ tenant, runId, type, payload, seq, cost }: AppendEvent): Promise<RunEvent> {
      const runKey = `${tenant}\u0000${runId}`;
      await ensureRun(tenant, runId, runKey);
      const event = (at: number): RunEvent => ({ runId, seq: at, type, payload, createdAt: now() });

      if (seq !== undefined) {
        // Seqs stay contiguous: seq may only follow the last one.
        if ((lastSeqHints.get(runKey) ?? 0) < seq - 1) {
          const last = await lastSeq(tenant, runId);
          if (last < seq - 1) throw new SequenceConflict(runId, seq, last);
        }
        const written = event(seq);
        if (!(await put(tenant, written, cost))) throw new SequenceConflict(runId, seq, await lastSeq(tenant, runId));
        remember(runKey, seq);
        return written;
      }

      let next = (lastSeqHints.get(runKey) ?? (await lastSeq(tenant, runId))) + 1;
      for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
        if (next > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
        const written = event(next);
        if (await put(tenant, written, cost)) {
          remember(runKey, next);
          return written;
        }
        // Another writer took it: try the next one, and now and then re-read where the run is.
        next = attempt % 8 === 0 ? (await lastSeq(tenant, runId)) + 1 : next + 1;
      }
      throw new ContentionExceeded(runId);
    },

    /** A page of events in seq order (or newest first), filtered by type; `more` tells whether any follow. */
    async page({ tenant, runId, after, before, limit, forward = true, types, consistent = false }: EventPageQuery) {
      const from = eventSk(Math.min((after ?? 0) + 1, MAX_INT));
      const to = eventSk(Math.max((before ?? MAX_INT + 1) - 1, 0));
      const events: RunEvent[] = [];
      if (from > to) return { events, more: false };
      let start: Record<string, unknown> | undefined;
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
            ExpressionAttributeValues: {
              ':pk': keys.runPartition(tenant, runId),
              ':from': from,
              ':to': to,
              ...(types?.length ? Object.fromEntries(types.map((t, i) => [`:type${i}`, t])) : {}),
            },
            ...(types?.length
              ? {
                  FilterExpression: `#type IN (${types.map((_, i) => `:type${i}`).join(', ')})`,
                  ExpressionAttributeNames: { '#type': attr.type },
                }
              : {}),
            ScanIndexForward: forward,
            ConsistentRead: consistent,
            // A filter applies after Limit: read wider pages so that a rare type costs few requests.
            Limit: types?.length ? Math.max(limit + 1, FILTERED_PAGE) : limit + 1,
            ExclusiveStartKey: start,
          }),
        );
        events.push(...(page.Items ?? []).map(toEvent));
        start = page.LastEvaluatedKey;
      } while (start && events.length <= limit);
      return { events: events.slice(0, limit), more: events.length > limit };
    },
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
