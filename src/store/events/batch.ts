/**
 * Plain appends (no seq, no cost, no idempotency key) to one run, written in groups: a batch
 * goes at the next free seqs, all or none, and after a collision with another process it goes
 * again after the run's new end.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import { ContentionExceeded, InvalidInput } from '../../domain/errors.ts';
import { MAX_INT } from '../../domain/limits.ts';
import type { RunEvent } from '../../domain/run.ts';
import { marshallOptions } from '../../table/client.ts';
import { attr, storable } from '../../table/codec.ts';
import type { StoreDeps } from '../deps.ts';
import { createGroupCommit, type Waiting } from './group-commit.ts';
import type { Positions } from './position.ts';
import { type AppendCounters, MAX_APPEND_ATTEMPTS, putBatch, putEvent } from './writes.ts';

/** Room in an item beside the payload's JSON (keys, type, timestamps), for sizing a batch. */
const ITEM_OVERHEAD_BYTES = 512;

export function createBatchedAppends(deps: StoreDeps, positions: Positions, counters: AppendCounters) {
  /** Writes a batch of appends to one run at the next free seqs, all or none; on a collision, after the run's new end. */
  async function commit(tenant: string, runId: string, batch: Waiting[], fencingToken?: number): Promise<RunEvent[]> {
    let next = await positions.nextSeq(tenant, runId);
    // No waiting between tries: a collision means the run's end moved, and it is read again.
    for (let attempt = 1; attempt <= MAX_APPEND_ATTEMPTS; attempt++) {
      if (next + batch.length - 1 > MAX_INT) throw new Error(`run ${runId} has used every seq up to ${MAX_INT}`);
      const events = batch.map((w, i): RunEvent => ({ runId, seq: next + i, type: w.type, payload: w.payload, createdAt: w.createdAt }));
      const written =
        events.length === 1
          ? await putEvent(deps, tenant, events[0] as RunEvent, undefined, undefined, fencingToken)
          : await putBatch(deps, tenant, events, fencingToken);
      if (written) {
        counters.appends += events.length;
        if (events.length > 1) counters.batches++;
        positions.remember(tenant, runId, next + events.length - 1);
        return events;
      }
      // Another process wrote some of these seqs: start again after the run's new end.
      counters.conflicts++;
      next = (await positions.lastSeq(tenant, runId)) + 1;
    }
    throw new ContentionExceeded(runId);
  }

  return createGroupCommit({
    commit,
    // Only an error that proves nothing was written sends a batch back one append at a time: after
    // an ambiguous one (a timeout, a 500) the batch may have landed, and writing it again would store it twice.
    alone: (err) => err instanceof InvalidInput || (err as Error)?.name === 'ValidationException',
    // A fence that fails fails every append of its batch: they all carried its token.
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
}
