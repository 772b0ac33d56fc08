/**
 * The append path: at exactly the seq asked for (refused if it is taken or would leave a gap),
 * or at the next free seqs, alone or in a group commit's batch, through one loop that moves on
 * past seqs other writers took.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import { ContentionExceeded, InvalidInput, SequenceConflict } from '../../domain/errors.ts';
import { MAX_INT } from '../../domain/limits.ts';
import type { RunEvent } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { marshallOptions } from '../../table/client.ts';
import { storable } from '../../table/codec.ts';
import { isUnappliedThrottle } from '../../table/failures.ts';
import type { StoreDeps } from '../deps.ts';
import { THROTTLE_RETRY, throttleDelay, wasRetriedOut } from '../throttles.ts';
import type { TransactItem } from '../write.ts';
import { createGroupCommit, type Waiting } from './group-commit.ts';
import type { Positions } from './position.ts';
import type { RunGates } from './run-gate.ts';
import { type AppendCounters, type EventWriteOptions, MAX_APPEND_ATTEMPTS, putEvents } from './writes.ts';

export interface AppendEvent {
  tenant: string;
  runId: string;
  type: string;
  payload: unknown;
  /** Exactly this seq (optimistic: refused if taken or if it would leave a gap); next free one when absent. */
  seq?: number;
  /** Charged to the run's budget in the same transaction. */
  cost?: number;
  /** Only while this token is the run's live claim (ClaimLost otherwise, nothing written). */
  fencingToken?: number;
}

/** The idempotency claim for the event about to be written, in the same transaction. */
export type EventClaim = (event: RunEvent) => TransactItem;

/** What an append is before it has a seq. */
type Unplaced = Pick<RunEvent, 'type' | 'payload' | 'createdAt'>;

/** A run's key among the run gates. */
export const runKey = (tenant: string, runId: string) => `${tenant}\u0000${runId}`;

/** Room in an item beside the payload's JSON (keys, type, timestamps), for sizing a batch. */
const ITEM_OVERHEAD_BYTES = 512;

export function createAppends(deps: StoreDeps, positions: Positions, counters: AppendCounters, gates: RunGates) {
  const placed = (runId: string, appends: readonly Unplaced[], first: number): RunEvent[] =>
    appends.map(({ type, payload, createdAt }, i) => ({ runId, seq: first + i, type, payload, createdAt, origin: 'CLIENT' }));

  /** Every append's write goes alongside the run's other appends, never while a server step has the run (run-gate.ts). */
  const put = (tenant: string, events: RunEvent[], options: EventWriteOptions) =>
    gates.batch(runKey(tenant, (events[0] as RunEvent).runId), () => putEvents(deps, tenant, events, options));

  const written = (tenant: string, events: RunEvent[]) => {
    counters.appends += events.length;
    if (events.length > 1) counters.batches++;
    positions.remember(tenant, (events[0] as RunEvent).runId, (events.at(-1) as RunEvent).seq);
    return events;
  };

  /**
   * Writes `appends` at the next free seqs, all together; after a collision with another
   * writer, again after the run's end, read again.
   * @throws ContentionExceeded when other writers kept taking the next seqs
   */
  async function atNextFree(
    tenant: string,
    runId: string,
    appends: readonly Unplaced[],
    options: Omit<EventWriteOptions, 'claim'> & { claim?: EventClaim } = {},
  ): Promise<RunEvent[]> {
    // Known: the append checked the run exists, which read its shard count.
    const shards = await positions.shardsOf(tenant, runId);
    let next = await positions.nextSeq(tenant, runId, shards);
    // No waiting between tries: a collision means the run's end moved, and it is read again.
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      if (next + appends.length - 1 > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
      const events = placed(runId, appends, next);
      const claim = options.claim?.(events[0] as RunEvent);
      if (await put(tenant, events, { ...options, claim, shards })) return written(tenant, events);
      counters.conflicts++;
      // After the run's end as it now is, never the next seq up: a writer bypassing the API may
      // have left a hole there, and an append filling it would come after events already handed out.
      next = (await positions.lastSeq(tenant, runId, shards)) + 1;
    }
    throw new ContentionExceeded(runId);
  }

  /** @throws SequenceConflict when `seq` is taken or would leave a gap */
  async function at(input: AppendEvent, seq: number, claim?: EventClaim) {
    const { tenant, runId } = input;
    const shards = await positions.shardsOf(tenant, runId);
    // Seqs stay contiguous: seq may only follow the last one.
    if ((positions.hint(tenant, runId) ?? 0) < seq - 1) {
      const last = await positions.lastSeq(tenant, runId, shards);
      if (last < seq - 1) throw new SequenceConflict(runId, seq, last);
    }
    const [event] = placed(runId, [{ ...input, createdAt: deps.now() }], seq) as [RunEvent];
    if (await put(tenant, [event], { cost: input.cost, claim: claim?.(event), fencingToken: input.fencingToken, shards }))
      return written(tenant, [event])[0] as RunEvent;
    counters.conflicts++;
    throw new SequenceConflict(runId, seq, await positions.lastSeq(tenant, runId, shards));
  }

  /** One append at the next free seq, with its cost and idempotency claim. */
  const next = async (input: AppendEvent, claim?: EventClaim) =>
    (await atNextFree(input.tenant, input.runId, [{ ...input, createdAt: deps.now() }], { ...input, claim }))[0] as RunEvent;

  /** Plain appends to one run in this process, written in groups (fenced ones grouped by their token). */
  const grouped = createGroupCommit({
    // One try per batch: a throttle comes back at once, for the queue to shrink its batch and
    // wait. A batch of one is a lone put, resent as it is (its write id recognises it) with the
    // usual tries; a throttle that outlived them is not sent again.
    commit: (tenant: string, runId: string, batch: Waiting[], fencingToken?: number) =>
      atNextFree(tenant, runId, batch, { fencingToken, throttleAttempts: batch.length > 1 ? 1 : undefined }),
    // Sent again as a new batch (new seqs may be chosen): only when it surely was not applied.
    throttled: (err) => isUnappliedThrottle(err) && !wasRetriedOut(err),
    throttleAttempts: (deps.throttleRetry ?? THROTTLE_RETRY).attempts,
    throttleDelay: (attempt) => throttleDelay(deps.throttleRetry ?? THROTTLE_RETRY, attempt),
    onGiveUp: () => deps.throttles?.gaveUp('append'),
    // Only an error that proves nothing was written sends a batch back one append at a time: after
    // an ambiguous one (a timeout, a 500) the batch may have landed, and writing it again would store it twice.
    alone: (err) => err instanceof InvalidInput || (err as Error)?.name === 'ValidationException',
    measure: (_type, payload) => {
      // Marshalled here, alone: a payload the SDK cannot take fails this append, not its batch.
      try {
        marshall({ [attr.payload]: storable(payload) }, marshallOptions);
      } catch (err) {
        throw new InvalidInput('input.payload', `cannot be stored: ${(err as Error).message}`);
      }
      return ITEM_OVERHEAD_BYTES + Buffer.byteLength(JSON.stringify(payload ?? null));
    },
  });

  const batched = (input: AppendEvent) =>
    grouped.append(input.tenant, input.runId, input.type, input.payload, deps.now(), input.fencingToken);

  return { at, next, batched };
}
