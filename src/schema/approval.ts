/** Approvals as first-class mutations: the status change and its timeline event in one transaction. */
import { z } from 'zod';
import { ClaimLost, IdempotencyConflict, RunNotFound, StatusConflict } from '../domain/errors.ts';
import type { ServerEventType } from '../domain/run.ts';
import { builder } from './builder.ts';
import type { Context } from './context.ts';
import { badInput } from './error-codes.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { fencingToken, fencingTokenDescription, id, owner, payload, text } from './inputs.ts';
import { RunRef } from './run.ts';

/** The event types an approval writes (server-written: appendEvent refuses them). */
export const APPROVAL_REQUESTED: ServerEventType = 'approval.requested';
export const APPROVAL_RESOLVED: ServerEventType = 'approval.resolved';
/** A rejected run ends here: it may not go on, and no one cancelled it. */
const REJECTED_STATUS = 'FAILED';
const MAX_REASON_LENGTH = 4096;

const expectedVersion = z.number().int().min(1, 'must be at least 1').optional().nullable();

function checkSize(value: unknown, field: string, { limits }: Context) {
  const size = Buffer.byteLength(JSON.stringify(value ?? null));
  if (size > limits.maxPayloadBytes)
    throw badInput(`${field}: is ${size} bytes, more than the limit of ${limits.maxPayloadBytes} (RUNPLANE_MAX_PAYLOAD_BYTES)`);
}

const RequestApprovalInput = builder.inputType('RequestApprovalInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    request: t.field({ type: 'JSON', required: true, description: 'What is to be approved (shown to the approver), any JSON.' }),
    expectedVersion: t.int({ description: 'Only if the run is still at this version; StatusConflict otherwise.' }),
    fencingToken: t.int({ description: fencingTokenDescription }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    runId: id,
    request: payload,
    expectedVersion,
    fencingToken: fencingToken.optional().nullable(),
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('requestApproval', (t) =>
  t.field({
    type: RunRef,
    description: `Moves a RUNNING run to AWAITING_APPROVAL and appends an \`${APPROVAL_REQUESTED}\` event (payload: { request, by: the asking key's name }) in one transaction.`,
    errors: { types: [StatusConflict, RunNotFound, ClaimLost, IdempotencyConflict] },
    args: { input: t.arg({ type: RequestApprovalInput, required: true }) },
    resolve: async (_, { input }, context) => {
      checkSize(input.request, 'input.request', context);
      const { tenant, stores, keyName } = context;
      const { run } = await stores.runs.decide(
        {
          tenant,
          runId: input.runId,
          from: 'RUNNING',
          to: 'AWAITING_APPROVAL',
          expectedVersion: input.expectedVersion ?? undefined,
          type: APPROVAL_REQUESTED,
          payload: { request: input.request, by: keyName },
          fencingToken: input.fencingToken ?? undefined,
        },
        idempotencyOf(tenant, 'requestApproval', input),
      );
      return { run, consistent: true };
    },
  }),
);

const ResolveApprovalInput = builder.inputType('ResolveApprovalInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    approve: t.boolean({ required: true, description: 'true: the run goes on (RUNNING); false: it ends (FAILED).' }),
    by: t.string({
      description: "A name the caller states (recorded as `statedBy`, the caller's word). Who decided is the key's name, recorded as `by`.",
      deprecationReason: "The decision records the deciding key's name (`key=tenant:role:name`); `by` is kept only as the caller's note.",
    }),
    reason: t.string({ description: 'Why (recorded in the event).' }),
    expectedVersion: t.int({ description: 'Only if the run is still at this version (the request you saw); StatusConflict otherwise.' }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    runId: id,
    approve: z.boolean(),
    by: owner.optional().nullable(),
    reason: text(MAX_REASON_LENGTH, { multiline: true }).optional().nullable(),
    expectedVersion,
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('resolveApproval', (t) =>
  t.field({
    type: RunRef,
    description: `Decides an AWAITING_APPROVAL run (the only way out of it): approved, it goes back to RUNNING; rejected, to ${REJECTED_STATUS}. Appends an \`${APPROVAL_RESOLVED}\` event (payload: { approved, by: the deciding key's name, reason, statedBy }) in the same transaction. Of two approvers racing, one wins; the other gets StatusConflict.`,
    errors: { types: [StatusConflict, RunNotFound, IdempotencyConflict] },
    args: { input: t.arg({ type: ResolveApprovalInput, required: true }) },
    resolve: async (_, { input }, { tenant, stores, keyName }) => {
      const { run } = await stores.runs.decide(
        {
          tenant,
          runId: input.runId,
          from: 'AWAITING_APPROVAL',
          to: input.approve ? 'RUNNING' : REJECTED_STATUS,
          expectedVersion: input.expectedVersion ?? undefined,
          type: APPROVAL_RESOLVED,
          payload: { approved: input.approve, by: keyName, reason: input.reason ?? null, statedBy: input.by ?? null },
        },
        idempotencyOf(tenant, 'resolveApproval', input),
      );
      return { run, consistent: true };
    },
  }),
);
