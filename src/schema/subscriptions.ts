import { z } from 'zod';
import { RunNotFound } from '../domain/errors.ts';
import { MAX_EVENT_SHARDS, MAX_INT } from '../domain/limits.ts';
import type { DeliveredEvent, Lease } from '../domain/run.ts';
import { EVENT_PAGES_PER_SHARD } from '../store/events/merge.ts';
import type { RunState } from '../streams/state-feeds.ts';
import { builder, invalidInput } from './builder.ts';
import { EventRef } from './event.ts';
import { amount, eventType, id } from './inputs.ts';
import { LeaseRef } from './lease.ts';
import { plainRead } from './plain-read.ts';
import { RunRef } from './run.ts';
import { RunStatusEnum } from './run-status.ts';
import { tableReads } from './table-reads.ts';

/**
 * A subscription's arguments, validated once when it subscribes. Declared with Pothos's
 * `validate`, they would be validated again around every event's resolve too (its argMappers
 * wrap resolve as well as subscribe): a tenth of a catch-up's time for the same answer. Each
 * schema is built once: zod compiles an object schema on its first use.
 */
function validated<T extends z.ZodRawShape>(schema: z.ZodObject<T>, args: unknown): z.infer<z.ZodObject<T>> {
  const parsed = schema.safeParse(args);
  if (!parsed.success) throw invalidInput(parsed.error.issues);
  return parsed.data;
}

const runEventsArgs = z.object({
  runId: id,
  afterSeq: amount.nullish(),
  types: z.array(eventType).max(20, 'at most 20 types').nullish(),
});
const runArgs = z.object({ runId: id });
const unitArgs = z.object({ unitId: id });

builder.subscriptionType({
  description:
    "Live changes, from the table's stream (every writer) and this server (at once). Over WebSocket (graphql-ws) or SSE, on /graphql.",
});

builder.subscriptionField('runEvents', (t) =>
  t.field({
    type: EventRef,
    description:
      "A run's events, each once, in seq order, with no gaps. With afterSeq: the events after it from the table, then live ones, joined without a gap or a duplicate. Without: live from now. A seq missing from the table (a writer that bypasses the API left a hole) is waited for, RUNPLANE_GAP_WAIT_SECONDS at most; then the next event lists it in `missingBefore`, and if it is written later it still comes, with `late: true`. A subscriber that stops reading costs the server a bounded buffer: its events are read from the table again once it reads on.",
    args: {
      runId: t.arg.id({ required: true }),
      afterSeq: t.arg.int(),
      types: t.arg.stringList({ description: 'Only events of these types.' }),
    },
    subscribe: async (_, args, { tenant, stores, live, connection, reads }) => {
      const { runId, afterSeq, types } = validated(runEventsArgs, args);
      // Whether the run is there, as appends know it (read at most once a minute per run).
      await stores.events.ensureRun(tenant, runId, reads);
      // An SSE client reconnecting says what it last got; that wins over the afterSeq it repeats.
      const resumeAfter = resumedSeq(connection.lastEventId) ?? afterSeq ?? undefined;
      return live.runEvents({ tenant, runId, afterSeq: resumeAfter, types: types ?? undefined, sendBuffer: connection.sendBuffer });
    },
    resolve: (event: DeliveredEvent) => event,
    // The run's row, at setup (remembered a minute).
    extensions: { ...plainRead, ...tableReads(1) },
  }),
);

builder.subscriptionField('runChanged', (t) =>
  t.field({
    type: RunRef,
    description:
      "The run's current state, then its state after each change of status, budget or claim. Compare version (and budget.version, claim.version): larger is newer. A worker holding the run learns here that it was cancelled (status CANCELLED) or taken over (another claim).",
    args: { runId: t.arg.id({ required: true }) },
    subscribe: async (_, args, { tenant, stores, live, connection, reads }) => {
      const { runId } = validated(runArgs, args);
      if (!(await stores.runs.read(tenant, runId, { consistent: true, eventLimit: 0, reads }))) throw new RunNotFound(runId);
      const seen = /^(\d{1,10})\.(\d{1,10})(?:\.(\d{1,10}))?$/.exec(connection.lastEventId ?? '');
      return live.runChanged({
        tenant,
        runId,
        sendBuffer: connection.sendBuffer,
        seen: seen ? { run: Number(seen[1]), budget: Number(seen[2]), claim: Number(seen[3] ?? 0) } : undefined,
      });
    },
    resolve: (state: RunState) => ({ run: state.run, budget: state.budget, claim: state.claim, consistent: true }),
    // The run's head, at setup.
    extensions: tableReads(1 + MAX_EVENT_SHARDS * EVENT_PAGES_PER_SHARD),
  }),
);

builder.subscriptionField('leaseChanged', (t) =>
  t.field({
    type: LeaseRef,
    description: "A unit's current lease (if it ever had one), then the lease after each change. Compare version: larger is newer.",
    args: { unitId: t.arg.id({ required: true }) },
    subscribe: (_, args, { tenant, live, connection }) => {
      const { unitId } = validated(unitArgs, args);
      return live.leaseChanged({ tenant, unitId, sendBuffer: connection.sendBuffer, seen: resumedSeq(connection.lastEventId) });
    },
    resolve: (lease: Lease) => lease,
    extensions: plainRead,
  }),
);

builder.subscriptionField('runsChanged', (t) =>
  t.field({
    type: RunRef,
    description:
      'Every run of the tenant, each time it is created or its status or budget changes, by any writer: its new state. Compare version (and budget.version): larger is newer. No current state first: list with `runs`, then apply what comes. A subscriber that stops reading while more than 1000 runs change gets a LIMIT_EXCEEDED error ending the stream: list again and resubscribe.',
    args: { status: t.arg({ type: RunStatusEnum, description: 'Only runs in this status after the change.' }) },
    subscribe: (_, { status }, { tenant, live, connection }) =>
      live.runsChanged({ tenant, status: status ?? undefined, sendBuffer: connection.sendBuffer }),
    resolve: (change: Pick<RunState, 'run' | 'budget'>) => ({ run: change.run, budget: change.budget, consistent: true }),
  }),
);

builder.subscriptionField('leasesChanged', (t) =>
  t.field({
    type: LeaseRef,
    description:
      'Every lease of the tenant, each time it is acquired, renewed or released, by any writer: its new state. Compare version: larger is newer. No current state first: list with `leases`. A subscriber that stops reading while more than 1000 units change gets a LIMIT_EXCEEDED error ending the stream.',
    subscribe: (_, __, { tenant, live, connection }) => live.leasesChanged({ tenant, sendBuffer: connection.sendBuffer }),
    resolve: (lease: Lease) => lease,
    extensions: plainRead,
  }),
);

/** A Last-Event-ID that is a seq (or version) this API wrote; anything else is ignored. */
function resumedSeq(lastEventId: string | undefined) {
  if (!lastEventId || !/^(0|[1-9][0-9]{0,9})$/.test(lastEventId)) return undefined;
  const seq = Number(lastEventId);
  return seq <= MAX_INT ? seq : undefined;
}
