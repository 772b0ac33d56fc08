/** The refusals clients branch on by __typename; each implements Error. */
import {
  BudgetExceeded,
  IdempotencyConflict,
  LeaseHeld,
  LeaseLost,
  RunAlreadyExists,
  RunNotFound,
  SequenceConflict,
  StatusConflict,
} from '../domain/errors.ts';
import { builder } from './builder.ts';
import { RunStatusEnum } from './run-status.ts';

export const ErrorInterface = builder.interfaceRef<Error>('Error').implement({
  description: 'An expected refusal: the request was valid but the state did not allow it.',
  fields: (t) => ({ message: t.exposeString('message') }),
});

builder.objectType(RunNotFound, {
  name: 'RunNotFound',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof RunNotFound,
  fields: (t) => ({ runId: t.exposeID('runId') }),
});

builder.objectType(RunAlreadyExists, {
  name: 'RunAlreadyExists',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof RunAlreadyExists,
  fields: (t) => ({ runId: t.exposeID('runId') }),
});

builder.objectType(SequenceConflict, {
  name: 'SequenceConflict',
  description: 'The seq asked for is taken or would leave a gap. Append at lastSeq + 1.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof SequenceConflict,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    seq: t.exposeInt('seq', { description: 'The seq that was asked for.' }),
    lastSeq: t.exposeInt('lastSeq', { description: "The run's last seq now." }),
  }),
});

builder.objectType(BudgetExceeded, {
  name: 'BudgetExceeded',
  description: 'The charge would pass the cap; nothing was charged or written.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof BudgetExceeded,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    cap: t.exposeInt('cap'),
    spent: t.exposeInt('spent'),
    remaining: t.exposeInt('remaining'),
    requested: t.exposeInt('requested', { description: 'The amount that was refused.' }),
  }),
});

builder.objectType(StatusConflict, {
  name: 'StatusConflict',
  description: 'The run is no longer in the status (or at the version) the transition expected.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof StatusConflict,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    expected: t.field({ type: RunStatusEnum, resolve: (e) => e.expected }),
    current: t.field({ type: RunStatusEnum, resolve: (e) => e.current }),
    currentVersion: t.exposeInt('currentVersion'),
    expectedVersion: t.exposeInt('expectedVersion', { nullable: true }),
  }),
});

builder.objectType(LeaseLost, {
  name: 'LeaseLost',
  description: 'The caller does not hold the lease with that token (any more): it expired, was released, or someone else took it.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof LeaseLost,
  fields: (t) => ({
    unitId: t.exposeID('unitId'),
    currentHolder: t.exposeString('holder', { nullable: true, description: 'Who holds the unit now, if anyone.' }),
    currentToken: t.exposeInt('token', { nullable: true, description: "The current holder's token, if anyone holds it." }),
  }),
});

builder.objectType(IdempotencyConflict, {
  name: 'IdempotencyConflict',
  description: 'The idempotency key was already used for a different request; nothing was applied.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof IdempotencyConflict,
  fields: (t) => ({
    key: t.exposeString('key'),
    operation: t.exposeString('operation', { description: 'The mutation the key was first used for.' }),
  }),
});

builder.objectType(LeaseHeld, {
  name: 'LeaseHeld',
  description: "Another owner's lease on the unit is live.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof LeaseHeld,
  fields: (t) => ({
    unitId: t.exposeID('unitId'),
    holder: t.exposeString('holder'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
  }),
});
