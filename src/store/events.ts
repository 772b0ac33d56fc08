/**
 * A run's event stream. An append is a put conditioned on its seq being free; with a
 * cost, the put and the budget charge are one transaction (both or neither).
 */
import { randomUUID } from 'node:crypto';
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { ContentionExceeded, InvalidInput, RunNotFound, SequenceConflict } from '../domain/errors.ts';
import { MAX_INT } from '../domain/limits.ts';
import type { RunEvent } from '../domain/run.ts';
import { marshallOptions } from '../table/client.ts';
import { attr, eventBytes, eventItem, storable, toEvent } from '../table/codec.ts';
import { conditions } from '../table/conditions.ts';
import { eventSk, keys } from '../table/keys.ts';
import { chargeRefusal, chargeUpdate } from './budgets.ts';
import type { ReadBudget, StoreDeps } from './deps.ts';
import { createGroupCommit, type Waiting } from './group-commit.ts';
import type { Idempotency, IdempotencyKey } from './idempotency.ts';
import { ConditionFailed, type TransactItem, type Write, write } from './write.ts';

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
  /** Stop after one DynamoDB request (at most 1 MB read), even with fewer events than `limit`. */
  singleRequest?: boolean;
  /** Charged with the size of what is read, before more is read (throws when it is spent). */
  budget?: ReadBudget;
}

/** Collisions tolerated before an append gives up (each one means another writer won a seq). */
const MAX_APPEND_ATTEMPTS = 256;
/** Items read per Query when filtering by type. */
const FILTERED_PAGE = 500;
/** How long a run's existence and last seq are trusted without reading them again. */
const REMEMBER_MS = 60_000;
/** Remembered per run: which runs exist and their last known seq. */
const MAX_REMEMBERED_RUNS = 10_000;

const isItemTooLarge = (err: unknown) => (err as Error)?.name === 'ValidationException' && /Item size/.test((err as Error).message);

export function createEventStore({ doc, tableName, now, groupCommit = true }: StoreDeps, idempotency: Idempotency) {
  /** For /metrics: appends written, seqs found taken (conditional-check failures), batches of more than one. */
  const counters = { appends: 0, conflicts: 0, batches: 0 };
  /** Runs known to exist, until when (re-checked after a while: a run expires eventually). */
  const knownRuns = new Map<string, number>();
  /** The last seq this process saw per run, and when (an old hint is not trusted). */
  const lastSeqHints = new Map<string, { seq: number; at: number }>();
  const hint = (runKey: string) => {
    const known = lastSeqHints.get(runKey);
    return known && Date.now() - known.at < REMEMBER_MS ? known.seq : undefined;
  };
  /** `read`: the seq was read from the table (authoritative), not merely written by us. */
  const remember = (runKey: string, seq: number, read = false) => {
    if (!read && (hint(runKey) ?? 0) > seq) return;
    lastSeqHints.delete(runKey);
    lastSeqHints.set(runKey, { seq, at: Date.now() });
    if (lastSeqHints.size > MAX_REMEMBERED_RUNS) lastSeqHints.delete(lastSeqHints.keys().next().value as string);
  };

  async function ensureRun(tenant: string, runId: string, runKey: string) {
    if ((knownRuns.get(runKey) ?? 0) > Date.now()) return;
    const { Item } = await doc.send(
      new GetCommand({
        TableName: tableName,
        Key: keys.run(tenant, runId),
        ConsistentRead: true,
        ProjectionExpression: 'pk, #expiresAt',
        ExpressionAttributeNames: { '#expiresAt': attr.expiresAt },
      }),
    );
    // A finished run past its retention is gone, though DynamoDB deletes it late.
    if (!Item || Number(Item[attr.expiresAt] ?? Number.POSITIVE_INFINITY) * 1000 <= now().getTime()) throw new RunNotFound(runId);
    if (knownRuns.size >= MAX_REMEMBERED_RUNS) knownRuns.clear();
    knownRuns.set(runKey, Date.now() + REMEMBER_MS);
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
    remember(`${tenant}\u0000${runId}`, last, true);
    return last;
  }

  /** Writes the event if its seq is free (with its cost, and after a claim); false if another writer has it. */
  async function put(tenant: string, event: RunEvent, cost: number | undefined, claim?: TransactItem) {
    const writeId = randomUUID();
    const charge = { tenant, runId: event.runId, amount: cost ?? 0 };
    // A seq is taken once: two writers can never both have it.
    const writes: Write[] = [
      { Put: { TableName: tableName, Item: eventItem(tenant, event, writeId), ConditionExpression: conditions.absent } },
    ];
    if (cost !== undefined) writes.push({ Update: chargeUpdate(tableName, charge, event.createdAt, writeId) });
    try {
      await write(doc, writes, claim);
      return true;
    } catch (err) {
      if (isItemTooLarge(err)) throw new InvalidInput('input.payload', 'is too large to store in one DynamoDB item (400 KB)');
      if (!(err instanceof ConditionFailed)) throw err;
      if (err.index === 1) throw chargeRefusal(charge, err.item);
      // Taken, unless the SDK resent our own put after a lost response: then the seq is ours.
      return err.item?.[attr.writeId] === writeId;
    }
  }

  /** Writes a batch of appends to one run at the next free seqs, all or none; on a collision, after the run's new end. */
  async function commitBatch(tenant: string, runId: string, batch: Waiting[]): Promise<RunEvent[]> {
    const runKey = `${tenant}\u0000${runId}`;
    let next = (hint(runKey) ?? (await lastSeq(tenant, runId))) + 1;
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      if (next + batch.length - 1 > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
      const events = batch.map((w, i): RunEvent => ({ runId, seq: next + i, type: w.type, payload: w.payload, createdAt: w.createdAt }));
      let written: boolean;
      if (events.length === 1) {
        written = await put(tenant, events[0] as RunEvent, undefined);
      } else {
        try {
          // Each seq is taken once: the batch lands whole, or not at all if any of its seqs is taken.
          await write(
            doc,
            events.map((event) => ({
              Put: { TableName: tableName, Item: eventItem(tenant, event, randomUUID()), ConditionExpression: conditions.absent },
            })),
          );
          written = true;
        } catch (err) {
          if (!(err instanceof ConditionFailed)) throw err;
          written = false;
        }
      }
      if (written) {
        counters.appends += events.length;
        if (events.length > 1) counters.batches++;
        remember(runKey, next + events.length - 1);
        return events;
      }
      // Another process wrote some of these seqs: start again after the run's new end.
      counters.conflicts++;
      next = (await lastSeq(tenant, runId)) + 1;
    }
    throw new ContentionExceeded(runId);
  }

  // Only an error that proves nothing was written sends a batch back one append at a time: after
  // an ambiguous one (a timeout, a 500) the batch may have landed, and writing it again would store it twice.
  const grouped = createGroupCommit({
    commit: commitBatch,
    alone: (err) => err instanceof InvalidInput || (err as Error)?.name === 'ValidationException',
    measure: (_type, payload) => {
      // Marshalled here, alone: a payload the SDK cannot take fails this append, not its batch.
      try {
        marshall({ [attr.payload]: storable(payload) }, marshallOptions);
      } catch (err) {
        throw new InvalidInput('input.payload', `cannot be stored: ${(err as Error).message}`);
      }
      return 512 + Buffer.byteLength(JSON.stringify(payload ?? null));
    },
  });

  async function appendOnce({ tenant, runId, type, payload, seq, cost }: AppendEvent, claim?: (event: RunEvent) => TransactItem) {
    const runKey = `${tenant}\u0000${runId}`;
    await ensureRun(tenant, runId, runKey);
    const event = (at: number): RunEvent => ({ runId, seq: at, type, payload, createdAt: now() });
    // Plain appends at the next seq are written in groups: no race for the same seq in this process.
    if (groupCommit && seq === undefined && cost === undefined && !claim) return grouped.append(tenant, runId, type, payload, now());

    if (seq !== undefined) {
      // Seqs stay contiguous: seq may only follow the last one.
      if ((hint(runKey) ?? 0) < seq - 1) {
        const last = await lastSeq(tenant, runId);
        if (last < seq - 1) throw new SequenceConflict(runId, seq, last);
      }
      const written = event(seq);
      if (!(await put(tenant, written, cost, claim?.(written)))) {
        counters.conflicts++;
        throw new SequenceConflict(runId, seq, await lastSeq(tenant, runId));
      }
      counters.appends++;
      remember(runKey, seq);
      return written;
    }

    let next = (hint(runKey) ?? (await lastSeq(tenant, runId))) + 1;
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      if (next > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
      const written = event(next);
      if (await put(tenant, written, cost, claim?.(written))) {
        counters.appends++;
        remember(runKey, next);
        return written;
      }
      counters.conflicts++;
      // Another writer took it: try the next one, and now and then re-read where the run is.
      next = attempt % 8 === 0 ? (await lastSeq(tenant, runId)) + 1 : next + 1;
    }
    throw new ContentionExceeded(runId);
  }

  return {
    counters,
    lastSeq,

    /**
     * @throws RunNotFound
     * @throws SequenceConflict for an explicit seq that is taken or would leave a gap
     * @throws BudgetExceeded when a cost would pass the cap (neither event nor charge is written)
     */
    async append(input: AppendEvent, idem?: IdempotencyKey): Promise<RunEvent> {
      if (!idem) return appendOnce(input);
      return idempotency.once<RunEvent>(idem, {
        perform: (claim) => appendOnce(input, (event) => claim(event)),
        encode: (event) => event,
        decode: (stored) => {
          const event = stored as RunEvent;
          return { ...event, createdAt: new Date(event.createdAt as unknown as string) };
        },
      });
    },

    /** A page of events in seq order (or newest first), filtered by type; `more` tells whether any follow. */
    async page({ tenant, runId, after, before, limit, forward = true, types, consistent = false, singleRequest, budget }: EventPageQuery) {
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
        const read = (page.Items ?? []).map(toEvent);
        // What the page will hand back is charged (the one read past `limit` only tells whether more follow).
        budget?.spend(read.slice(0, Math.max(0, limit - events.length)).reduce((bytes, event) => bytes + eventBytes(event), 0));
        events.push(...read);
        start = page.LastEvaluatedKey;
      } while (start && events.length <= limit && !singleRequest);
      return { events: events.slice(0, limit), more: events.length > limit || (singleRequest === true && start !== undefined) };
    },
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
