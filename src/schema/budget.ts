import { z } from 'zod';
import { BudgetExceeded, ClaimLost, IdempotencyConflict, RunNotFound } from '../domain/errors.ts';
import type { Budget } from '../domain/run.ts';
import { builder } from './builder.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { amount, fencingToken, fencingTokenDescription, id } from './inputs.ts';

export const BudgetRef = builder.objectRef<Budget>('Budget').implement({
  description: "A run's budget: spent never exceeds cap.",
  fields: (t) => ({
    id: t.id({
      description: "The budget's identity, for normalized caches (Apollo, urql): its run's id (one budget per run).",
      resolve: (budget) => budget.runId,
    }),
    runId: t.exposeID('runId'),
    cap: t.exposeInt('cap'),
    spent: t.exposeInt('spent'),
    remaining: t.exposeInt('remaining'),
    version: t.exposeInt('version', { description: 'Grows by one with every charge: of two states, the larger version is newer.' }),
  }),
});

const ChargeBudgetInput = builder.inputType('ChargeBudgetInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    amount: t.int({ required: true }),
    fencingToken: t.int({ description: fencingTokenDescription }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({ runId: id, amount, fencingToken: fencingToken.optional().nullable(), idempotencyKey: id.optional().nullable() }),
});

builder.mutationField('chargeBudget', (t) =>
  t.field({
    type: BudgetRef,
    description: 'Charges the run budget, or refuses (changing nothing) if the charge would pass the cap.',
    errors: { types: [BudgetExceeded, RunNotFound, ClaimLost, IdempotencyConflict] },
    args: { input: t.arg({ type: ChargeBudgetInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) =>
      stores.budgets.charge(
        { tenant, runId: input.runId, amount: input.amount, fencingToken: input.fencingToken ?? undefined },
        idempotencyOf(tenant, 'chargeBudget', input),
      ),
  }),
);
