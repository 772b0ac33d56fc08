/**
 * A run's event stream. An append is a put conditioned on its seq being free; with a cost,
 * the put and the budget charge are one transaction (both or neither).
 */
import type { RunEvent } from '../../domain/run.ts';
import { stored } from '../../table/stored-results.ts';
import type { StoreDeps } from '../deps.ts';
import type { Idempotency, IdempotencyKey } from '../idempotency.ts';
import type { TableReads } from '../reads.ts';
import { type AppendEvent, createAppends, type EventClaim, runKey } from './append.ts';
import { type EventPageQuery, pageEvents } from './page.ts';
import { createPositions } from './position.ts';
import { createRunGates } from './run-gate.ts';
import type { AppendCounters } from './writes.ts';

export type { AppendEvent } from './append.ts';
export type { EventPageQuery } from './page.ts';

export function createEventStore(deps: StoreDeps, idempotency: Idempotency) {
  const counters: AppendCounters = { appends: 0, conflicts: 0, batches: 0 };
  const positions = createPositions(deps);
  const gates = createRunGates();
  const appends = createAppends(deps, positions, counters, gates);
  const grouped = deps.groupCommit !== false;

  async function appendOnce(input: AppendEvent, claim?: EventClaim) {
    await positions.ensureRun(input.tenant, input.runId);
    if (input.seq !== undefined) return appends.at(input, input.seq, claim);
    // Appends at the next seq are written in groups (fenced ones by their token): no race for the same seq in this process.
    if (grouped && input.cost === undefined && !claim) return appends.batched(input);
    return appends.next(input, claim);
  }

  return {
    /** For /metrics: appends written, seqs found taken (conditional-check failures), batches of more than one. */
    counters,
    /** The run's highest seq (0 for none), strongly consistent. */
    lastSeq: positions.lastSeq,
    /**
     * Runs a server step on the run with the run to itself in this process: the batches of
     * appends being written land first, and new ones wait until it is done (run-gate.ts).
     */
    alone: <T>(tenant: string, runId: string, step: () => Promise<T>) => gates.step(runKey(tenant, runId), step),
    /**
     * Whether the run exists: read strongly consistent, then trusted for a minute (a run is
     * deleted only by its TTL, long after it finished).
     * @throws RunNotFound
     */
    ensureRun: async (tenant: string, runId: string, reads?: TableReads) => {
      await positions.ensureRun(tenant, runId, reads);
    },

    /**
     * @throws RunNotFound
     * @throws SequenceConflict for an explicit seq that is taken or would leave a gap
     * @throws BudgetExceeded when a cost would pass the cap (neither event nor charge is written)
     */
    async append(input: AppendEvent, idem?: IdempotencyKey): Promise<RunEvent> {
      if (!idem) return appendOnce(input);
      return idempotency.once<RunEvent>(idem, {
        perform: (claim) => appendOnce(input, claim),
        encode: (event) => event,
        decode: stored.event,
      });
    },

    /** A page of events in seq order (or newest first), filtered by type; `more` tells whether any follow. */
    page: async (query: EventPageQuery) =>
      pageEvents(deps, { ...query, shards: await positions.shardsOf(query.tenant, query.runId, query.reads) }),

    /** The run's event shard count (1 for a run that does not exist), and what this process knows of it without a read. */
    shardsOf: positions.shardsOf,
    knownShards: positions.knownShards,
    rememberShards: positions.rememberShards,
  };
}

export type EventStore = ReturnType<typeof createEventStore>;
