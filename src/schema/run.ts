import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ClaimLost, IdempotencyConflict, RunAlreadyExists, RunNotFound, StatusConflict } from '../domain/errors.ts';
import { DEFAULT_PAGE_SIZE, MAX_EVENT_SHARDS, MAX_TASK_LENGTH } from '../domain/limits.ts';
import {
  allowedTransitions,
  type Budget,
  canTransition,
  leftOnlyBy,
  type Run,
  type RunClaim,
  type RunEvent,
  runStatuses,
} from '../domain/run.ts';
import { EVENT_PAGES_PER_SHARD } from '../store/events/merge.ts';
import { LISTING_PAGES_PER_SHARD, LISTING_SHARDS } from '../store/listing-pages.ts';
import { BudgetRef } from './budget.ts';
import { builder } from './builder.ts';
import { EventConnection } from './event.ts';
import { eventPage } from './event-page.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { amount, eventType, fencingToken, fencingTokenDescription, id, text } from './inputs.ts';
import { listingConnection, listingPageSize, shortPagesDescription } from './listing.ts';
import { firstEventsWanted, runHeadsWanted } from './prefetch.ts';
import { RunStatusEnum } from './run-status.ts';
import { tableReads } from './table-reads.ts';

/** A run as resolved: what the one partition Query found, so fields need no further reads. */
export interface RunParent {
  run: Run;
  budget?: Budget | null;
  /** Its claim row, when the read fetched it with the run (null: never claimed). */
  claim?: RunClaim | null;
  /** The first events, when the read fetched them with the run. */
  firstEvents?: { events: RunEvent[]; more: boolean };
  consistent: boolean;
}

export const RunRef = builder.objectRef<RunParent>('Run').implement({
  description: "An agent's run: status, budget and event stream.",
  fields: (t) => ({
    id: t.id({ resolve: (p) => p.run.id }),
    task: t.string({ resolve: (p) => p.run.task }),
    status: t.field({ type: RunStatusEnum, resolve: (p) => p.run.status }),
    version: t.int({ description: 'Grows by one with every change to the run.', resolve: (p) => p.run.version }),
    createdAt: t.field({ type: 'DateTime', resolve: (p) => p.run.createdAt }),
    updatedAt: t.field({ type: 'DateTime', resolve: (p) => p.run.updatedAt }),
    eventShards: t.int({
      description: "Over how many partition keys the run's events are spread (fixed at creation).",
      resolve: (p) => p.run.eventShards,
    }),
    budget: t.field({
      type: BudgetRef,
      // Read with the run, or with the other runs of a listing's page (a BatchGetItem per 50 runs).
      extensions: tableReads(1),
      resolve: async (p, _, { tenant, stores, reads }) => {
        // A run of a listing has none read with it: its budget is read with the others' of the page (one batch).
        const budget = p.budget !== undefined ? p.budget : (await stores.runs.headRows(tenant, p.run.id, reads)).budget;
        if (!budget) throw new Error(`run ${p.run.id} has no budget row`);
        return budget;
      },
    }),
    lastSeq: t.int({
      description: 'The seq of the last event (0 before the first). Free when the first page held every event; one extra read otherwise.',
      // The run's shard count, then the last event of each of its event shards.
      extensions: tableReads(1 + MAX_EVENT_SHARDS),
      resolve: async (p, _, { tenant, stores, reads }) => {
        if (p.firstEvents && !p.firstEvents.more) return p.firstEvents.events.at(-1)?.seq ?? 0;
        return stores.events.lastSeq(tenant, p.run.id, undefined, reads);
      },
    }),
    events: t.field({
      type: EventConnection,
      description:
        'Events in seq order, paged by cursor (`first`/`after`, or `last`/`before` from the end). A page may hold fewer events than asked, none even, when its reads run out first (with `types`, when most of what was read is of other types): keep paging while `hasNextPage` with `after: pageInfo.endCursor` (backwards: while `hasPreviousPage`, with `before: pageInfo.startCursor`); these go on from where the read stopped.',
      // The run's shard count, then up to EVENT_PAGES_PER_SHARD Queries of each event shard (a filter may drop all a page holds).
      extensions: tableReads(1 + MAX_EVENT_SHARDS * EVENT_PAGES_PER_SHARD),
      args: {
        ...t.arg.connectionArgs(),
        afterSeq: t.arg.int({ description: 'Only events after this seq.', validate: amount }),
        types: t.arg.stringList({ description: 'Only events of these types.', validate: z.array(eventType).max(20, 'at most 20 types') }),
      },
      resolve: (p, args, context) => eventPage(p, args, context),
    }),
  }),
});

builder.queryField('run', (t) =>
  t.field({
    type: RunRef,
    nullable: true,
    description:
      'A run with its budget and first events, read in one request. Eventually consistent unless `consistent: true` (use that before a decision).',
    // Its partition's one Query, and a few of each event shard.
    extensions: tableReads(1 + MAX_EVENT_SHARDS * EVENT_PAGES_PER_SHARD),
    args: {
      id: t.arg.id({ required: true, validate: id }),
      consistent: t.arg.boolean({ description: 'Read the latest committed state (strongly consistent).' }),
    },
    resolve: async (_, args, { tenant, stores, limits, response, reads }, info) => {
      const consistent = args.consistent ?? false;
      const eventLimit = firstEventsWanted(info, limits.maxPageSize);
      const snapshot = await stores.runs.read(tenant, args.id, { consistent, eventLimit, responseLimit: response, reads });
      if (!snapshot) return null;
      return {
        run: snapshot.run,
        budget: snapshot.budget,
        claim: snapshot.claim,
        firstEvents: { events: snapshot.events, more: snapshot.moreEvents },
        consistent,
      };
    },
  }),
);

const CreateRunInput = builder.inputType('CreateRunInput', {
  fields: (t) => ({
    id: t.id({ description: 'The run id; the server makes one when absent.' }),
    task: t.string({ required: true, description: 'What the run is for.' }),
    budgetCap: t.int({ required: true, description: 'The most the run may spend.' }),
    eventShards: t.int({
      description: `Over how many partition keys to spread the run's events (default 1, at most ${MAX_EVENT_SHARDS}): each takes a partition's write throughput, and every read of the events queries each. Fixed for the run's life.`,
    }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    id: id.optional().nullable(),
    task: text(MAX_TASK_LENGTH, { multiline: true }),
    budgetCap: amount,
    eventShards: z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(MAX_EVENT_SHARDS, `must be at most ${MAX_EVENT_SHARDS}`)
      .optional()
      .nullable(),
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('createRun', (t) =>
  t.field({
    type: RunRef,
    description: 'Creates a run (status RUNNING) and its budget, together.',
    errors: { types: [RunAlreadyExists, IdempotencyConflict] },
    args: { input: t.arg({ type: CreateRunInput, required: true }) },
    resolve: async (_, { input }, { tenant, stores }) => {
      const { run, budget } = await stores.runs.create(
        { tenant, id: input.id ?? randomUUID(), task: input.task, budgetCap: input.budgetCap, eventShards: input.eventShards ?? 1 },
        idempotencyOf(tenant, 'createRun', input),
      );
      return { run, budget, firstEvents: { events: [], more: false }, consistent: true };
    },
  }),
);

const TransitionRunInput = builder.inputType('TransitionRunInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    from: t.field({ type: RunStatusEnum, required: true, description: 'The status you saw: the transition happens only from it.' }),
    to: t.field({ type: RunStatusEnum, required: true }),
    expectedVersion: t.int({ description: 'Only if the run is still at this version (optimistic concurrency); StatusConflict otherwise.' }),
    fencingToken: t.int({ description: fencingTokenDescription }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z
    .object({
      runId: id,
      from: z.enum(runStatuses),
      to: z.enum(runStatuses),
      expectedVersion: z.number().int().min(1, 'must be at least 1').optional().nullable(),
      fencingToken: fencingToken.optional().nullable(),
      idempotencyKey: id.optional().nullable(),
    })
    .superRefine(({ from, to }, ctx) => {
      if (canTransition(from, to)) return;
      const next = allowedTransitions(from);
      const only = leftOnlyBy[from];
      const why = next.length
        ? `from ${from} a run may go to ${next.join(', ')}`
        : only
          ? `${from} is left only through ${only}`
          : `${from} is terminal`;
      ctx.addIssue({ code: 'custom', path: ['to'], message: `${from} -> ${to} is not a legal transition (${why})` });
    }),
});

builder.mutationField('transitionRun', (t) =>
  t.field({
    type: RunRef,
    description: `Moves a run from the status you saw to the next one (to a finished status: its claim ends with it). Legal moves: ${runStatuses
      .map((s) => `${s} -> ${allowedTransitions(s).join('|') || (leftOnlyBy[s] ? `(only through ${leftOnlyBy[s]})` : '(terminal)')}`)
      .join('; ')}.`,
    errors: { types: [StatusConflict, RunNotFound, ClaimLost, IdempotencyConflict] },
    args: { input: t.arg({ type: TransitionRunInput, required: true }) },
    resolve: async (_, { input }, { tenant, stores }) => {
      const run = await stores.runs.transition(
        {
          tenant,
          runId: input.runId,
          from: input.from,
          to: input.to,
          expectedVersion: input.expectedVersion ?? undefined,
          fencingToken: input.fencingToken ?? undefined,
        },
        idempotencyOf(tenant, 'transitionRun', input),
      );
      return { run, consistent: true };
    },
  }),
);

const RunConnection = builder.connectionObject({ type: RunRef, name: 'RunConnection' }, { name: 'RunEdge' });

builder.queryField('runs', (t) =>
  t.field({
    type: RunConnection,
    description: `The tenant's runs, newest first, optionally in one status, paged by cursor. Read from an index: eventually consistent (a run created a moment ago may show a moment later). ${shortPagesDescription}`,
    // A few Queries of each listing shard.
    extensions: tableReads(LISTING_SHARDS * LISTING_PAGES_PER_SHARD),
    args: {
      status: t.arg({ type: RunStatusEnum }),
      first: t.arg.int({ description: `Page size (default ${DEFAULT_PAGE_SIZE}, at most RUNPLANE_MAX_PAGE_SIZE: 500 unless configured).` }),
      after: t.arg.string(),
    },
    resolve: async (_, args, { tenant, stores, limits, reads }, info) => {
      const first = listingPageSize(args.first, limits.maxPageSize);
      const page = await stores.runList.list({ tenant, status: args.status ?? undefined, first, after: args.after ?? undefined, reads });
      // Budgets and claims asked for: the page's read together, so that their fields resolve at once.
      const heads = runHeadsWanted(info)
        ? await stores.runs.headsOf(
            tenant,
            page.runs.map(({ run }) => run.id),
            reads,
          )
        : undefined;
      const edges = page.runs.map(({ run, cursor }) => {
        const head = heads?.get(run.id);
        return { cursor, node: { run, consistent: false, ...(head && { budget: head.budget, claim: head.claim }) } };
      });
      return listingConnection(edges, page, args.after);
    },
  }),
);
