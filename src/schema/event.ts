import { GraphQLError } from 'graphql';
import { z } from 'zod';
import { BudgetExceeded, IdempotencyConflict, RunNotFound, SequenceConflict } from '../domain/errors.ts';
import { MAX_INT } from '../domain/limits.ts';
import type { RunEvent } from '../domain/run.ts';
import { builder } from './builder.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { amount, eventType, id, payload, positive } from './inputs.ts';

export const EventRef = builder.objectRef<RunEvent>('Event').implement({
  description: "One entry in a run's event stream. Seqs of a run are 1, 2, 3, ... with no gaps.",
  fields: (t) => ({
    runId: t.exposeID('runId'),
    seq: t.exposeInt('seq'),
    type: t.exposeString('type'),
    payload: t.expose('payload', { type: 'JSON', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const EventConnection = builder.connectionObject({ type: EventRef, name: 'EventConnection' }, { name: 'EventEdge' });

const cursorPrefix = 'seq:';
export const eventCursor = (seq: number) => Buffer.from(`${cursorPrefix}${seq}`).toString('base64url');

/** The seq a cursor points at; a cursor this API did not hand out is refused. */
export function seqOfCursor(cursor: string | null | undefined, arg: string) {
  if (cursor == null) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString();
  const seq = Number(text.slice(cursorPrefix.length));
  if (!text.startsWith(cursorPrefix) || !Number.isSafeInteger(seq) || seq < 0 || seq > MAX_INT) {
    throw new GraphQLError(`Invalid input: ${arg}: not a cursor of this connection`, { extensions: { code: 'BAD_USER_INPUT' } });
  }
  return seq;
}

const AppendEventInput = builder.inputType('AppendEventInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    type: t.string({ required: true, description: 'What happened, e.g. `tool.returned`.' }),
    payload: t.field({ type: 'JSON', description: `Any JSON value, up to the server's payload limit.` }),
    seq: t.int({ description: 'Append exactly here (optimistic concurrency): refused with SequenceConflict if taken or not next.' }),
    cost: t.int({ description: 'Charged to the run budget in the same transaction: both or neither.' }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    runId: id,
    type: eventType,
    payload: payload.optional().nullable(),
    seq: positive.optional().nullable(),
    cost: amount.optional().nullable(),
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('appendEvent', (t) =>
  t.field({
    type: EventRef,
    description: "Appends an event at the run's next seq (or exactly at `seq`).",
    errors: { types: [SequenceConflict, RunNotFound, BudgetExceeded, IdempotencyConflict] },
    args: { input: t.arg({ type: AppendEventInput, required: true }) },
    resolve: (_, { input }, { tenant, stores, limits }) => {
      const size = Buffer.byteLength(JSON.stringify(input.payload ?? null));
      if (size > limits.maxPayloadBytes) {
        throw new GraphQLError(`Invalid input: input.payload: is ${size} bytes, more than the limit of ${limits.maxPayloadBytes}`, {
          extensions: { code: 'BAD_USER_INPUT' },
        });
      }
      return stores.events.append(
        {
          tenant,
          runId: input.runId,
          type: input.type,
          payload: input.payload ?? null,
          seq: input.seq ?? undefined,
          cost: input.cost ?? undefined,
        },
        idempotencyOf(tenant, 'appendEvent', input),
      );
    },
  }),
);
