/**
 * Appends one at a time: at exactly the seq asked for (refused if it is taken or would leave a
 * gap), or at the next free seq (moving on past seqs other writers took).
 */
import { ContentionExceeded, SequenceConflict } from '../../domain/errors.ts';
import { MAX_INT } from '../../domain/limits.ts';
import type { RunEvent } from '../../domain/run.ts';
import type { StoreDeps } from '../deps.ts';
import type { TransactItem } from '../write.ts';
import type { Positions } from './position.ts';
import { type AppendCounters, MAX_APPEND_ATTEMPTS, putEvent } from './writes.ts';

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

export function createAppends(deps: StoreDeps, positions: Positions, counters: AppendCounters) {
  const eventAt = ({ runId, type, payload }: AppendEvent, seq: number): RunEvent => ({ runId, seq, type, payload, createdAt: deps.now() });
  const written = (event: RunEvent, tenant: string) => {
    counters.appends++;
    positions.remember(tenant, event.runId, event.seq);
    return event;
  };

  /** @throws SequenceConflict when `seq` is taken or would leave a gap */
  async function at(input: AppendEvent, seq: number, claim?: EventClaim) {
    const { tenant, runId } = input;
    // Seqs stay contiguous: seq may only follow the last one.
    if ((positions.hint(tenant, runId) ?? 0) < seq - 1) {
      const last = await positions.lastSeq(tenant, runId);
      if (last < seq - 1) throw new SequenceConflict(runId, seq, last);
    }
    const event = eventAt(input, seq);
    if (await putEvent(deps, tenant, event, input.cost, claim?.(event), input.fencingToken)) return written(event, tenant);
    counters.conflicts++;
    throw new SequenceConflict(runId, seq, await positions.lastSeq(tenant, runId));
  }

  /** @throws ContentionExceeded when other writers kept taking the next seq */
  async function next(input: AppendEvent, claim?: EventClaim) {
    const { tenant, runId } = input;
    let seq = await positions.nextSeq(tenant, runId);
    // No waiting between tries: a taken seq means the next one is likely free.
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      if (seq > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
      const event = eventAt(input, seq);
      if (await putEvent(deps, tenant, event, input.cost, claim?.(event), input.fencingToken)) return written(event, tenant);
      counters.conflicts++;
      // Another writer took it: try the next one, and now and then re-read where the run is.
      seq = attempt % 8 === 0 ? (await positions.lastSeq(tenant, runId)) + 1 : seq + 1;
    }
    throw new ContentionExceeded(runId);
  }

  return { at, next };
}
