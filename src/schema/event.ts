import { z } from 'zod';
import { BudgetExceeded, ClaimLost, IdempotencyConflict, RunNotFound, SequenceConflict } from '../domain/errors.ts';
import { MAX_INT } from '../domain/limits.ts';
import {
  type DeliveredEvent,
  type EventOrigin,
  originOf,
  passesForServerEventType,
  type SeqRange,
  serverEventTypes,
} from '../domain/run.ts';
import { builder } from './builder.ts';
import { badInput } from './error-codes.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { amount, eventType, fencingToken, fencingTokenDescription, id, payload, positive } from './inputs.ts';
import { plainRead } from './plain-read.ts';
import { jsonOut } from './scalars.ts';

const SeqRangeRef = builder.objectRef<SeqRange>('SeqRange').implement({
  description: 'Seqs from `from` to `to`, both included.',
  fields: (t) => ({ from: t.exposeInt('from'), to: t.exposeInt('to') }),
});

const EventOriginEnum = builder.enumType('EventOrigin', {
  description: 'Who wrote an event. The server sets it; no input can.',
  values: {
    SERVER: {
      value: 'SERVER',
      description: `Written by Runplane itself for its own steps of the run (${serverEventTypes.join(', ')}), with the change each records.`,
    },
    CLIENT: {
      value: 'CLIENT',
      description:
        'Written through appendEvent, or by anything else with access to the table (a row written around the API without an origin is one).',
    },
  } satisfies Record<EventOrigin, { value: EventOrigin; description: string }>,
});

export const EventRef = builder.objectRef<DeliveredEvent>('Event').implement({
  description: "One entry in a run's event stream. Seqs of a run are 1, 2, 3, ... with no gaps.",
  fields: (t) => ({
    id: t.id({
      description: "The event's identity, for normalized caches: `<runId>:<seq>`.",
      resolve: (event) => `${event.runId}:${event.seq}`,
      extensions: plainRead,
    }),
    runId: t.exposeID('runId'),
    seq: t.exposeInt('seq'),
    type: t.exposeString('type'),
    payload: t.field({ type: 'JSON', nullable: true, resolve: (event) => jsonOut(event.payload), extensions: plainRead }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    origin: t.field({
      type: EventOriginEnum,
      description:
        "Who wrote the event, as the server recorded it: tell the server's own steps by this, not by the type (a client's type may look like one of the server's).",
      resolve: originOf,
      extensions: plainRead,
    }),
    missingBefore: t.field({
      type: [SeqRangeRef],
      description:
        'In runEvents: seqs the subscription stepped over since the previous event it delivered, because they were still not in the table after RUNPLANE_GAP_WAIT_SECONDS (a writer that bypasses the API left a hole). Empty otherwise, and always in queries. Read them later with run.events; if one is written, the subscription still delivers it, with `late: true`.',
      resolve: (event) => event.missingBefore ?? [],
      extensions: plainRead,
    }),
    late: t.boolean({
      description: 'In runEvents: true when this event comes after later seqs, because it filled a hole listed before in `missingBefore`.',
      resolve: (event) => event.late ?? false,
      extensions: plainRead,
    }),
  }),
});

export const EventConnection = builder.connectionObject({ type: EventRef, name: 'EventConnection' }, { name: 'EventEdge' });

const cursorPrefix = 'seq:';
export const eventCursor = (seq: number) => Buffer.from(`${cursorPrefix}${seq}`).toString('base64url');

/** Exactly what eventCursor writes: decimal digits, no sign, no leading zero, no hex or exponent. */
const CURSOR_TEXT = /^seq:(0|[1-9][0-9]{0,9})$/;

/** The seq a cursor points at; a cursor this API did not hand out is refused. */
export function seqOfCursor(cursor: string | null | undefined, arg: string) {
  if (cursor == null) return undefined;
  const text = /^[A-Za-z0-9_-]{1,40}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString() : '';
  const match = CURSOR_TEXT.exec(text);
  const seq = Number(match?.[1]);
  if (!match || eventCursor(seq) !== cursor || seq > MAX_INT) {
    throw badInput(`${arg}: not a cursor of this connection`);
  }
  return seq;
}

const AppendEventInput = builder.inputType('AppendEventInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    type: t.string({
      required: true,
      description: `What happened, e.g. \`tool.returned\`. The types the server writes itself (${serverEventTypes.join(', ')}) are refused, and so are types spelled to look like them.`,
    }),
    payload: t.field({ type: 'JSON', description: `Any JSON value, up to the server's payload limit.` }),
    seq: t.int({ description: 'Append exactly here (optimistic concurrency): refused with SequenceConflict if taken or not next.' }),
    cost: t.int({ description: 'Charged to the run budget in the same transaction: both or neither.' }),
    fencingToken: t.int({ description: fencingTokenDescription }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    runId: id,
    type: eventType.refine((type) => !passesForServerEventType(type), {
      message: `is a type the server writes itself, with the change it records (${serverEventTypes.join(', ')}): use a type of your own`,
    }),
    payload: payload.optional().nullable(),
    seq: positive.optional().nullable(),
    cost: amount.optional().nullable(),
    fencingToken: fencingToken.optional().nullable(),
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('appendEvent', (t) =>
  t.field({
    type: EventRef,
    description: "Appends an event at the run's next seq (or exactly at `seq`).",
    errors: { types: [SequenceConflict, RunNotFound, BudgetExceeded, ClaimLost, IdempotencyConflict] },
    args: { input: t.arg({ type: AppendEventInput, required: true }) },
    resolve: (_, { input }, { tenant, stores, limits }) => {
      const size = Buffer.byteLength(JSON.stringify(input.payload ?? null));
      if (size > limits.maxPayloadBytes) {
        throw badInput(`input.payload: is ${size} bytes, more than the limit of ${limits.maxPayloadBytes} (RUNPLANE_MAX_PAYLOAD_BYTES)`);
      }
      return stores.events.append(
        {
          tenant,
          runId: input.runId,
          type: input.type,
          payload: input.payload ?? null,
          seq: input.seq ?? undefined,
          cost: input.cost ?? undefined,
          fencingToken: input.fencingToken ?? undefined,
        },
        idempotencyOf(tenant, 'appendEvent', input),
      );
    },
  }),
);
