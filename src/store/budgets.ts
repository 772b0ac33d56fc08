/** The budget ledger: a charge is ONE conditional update, never read-modify-write. */
import { randomUUID } from 'node:crypto';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { BudgetExceeded, RunNotFound } from '../domain/errors.ts';
import type { Budget } from '../domain/run.ts';
import { attr, toBudget } from '../table/codec.ts';
import { conditions, isConditionalCheckFailed, oldItem } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';
import { retryConflicts } from './retry.ts';

export interface Charge {
  tenant: string;
  runId: string;
  amount: number;
}

/** The update that charges `amount`, for use alone or inside a transaction. */
export function chargeUpdate(tableName: string, { tenant, runId, amount }: Charge, now: Date, chargeId: string) {
  return {
    TableName: tableName,
    Key: keys.budget(tenant, runId),
    UpdateExpression: 'ADD #spent :amount, #remaining :minus, #version :one SET #updatedAt = :now, #lastCharge = :chargeId',
    // The run exists, the charge keeps spent <= cap, and this very charge was not applied
    // already (an SDK resend after a lost response finds its own id and stops).
    ConditionExpression: `${conditions.present} AND ${conditions.budgetCovers} AND ${conditions.notLastCharge}`,
    ExpressionAttributeNames: {
      '#spent': attr.spent,
      '#remaining': attr.remaining,
      '#version': attr.version,
      '#updatedAt': attr.updatedAt,
      '#lastCharge': attr.lastChargeId,
    },
    ExpressionAttributeValues: { ':amount': amount, ':minus': -amount, ':one': 1, ':now': now.toISOString(), ':chargeId': chargeId },
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
}

/** Turns the budget row a refused charge found into the refusal. */
export function chargeRefusal(charge: Charge, found: Record<string, unknown> | undefined) {
  return found ? new BudgetExceeded(toBudget(found), charge.amount) : new RunNotFound(charge.runId);
}

export function createBudgetStore({ doc, tableName, now }: StoreDeps) {
  return {
    /**
     * @throws BudgetExceeded when the charge would pass the cap (nothing is charged)
     * @throws RunNotFound when the run does not exist
     */
    async charge(charge: Charge): Promise<Budget> {
      const chargeId = randomUUID();
      try {
        const { Attributes } = await retryConflicts(() =>
          doc.send(new UpdateCommand({ ...chargeUpdate(tableName, charge, now(), chargeId), ReturnValues: 'ALL_NEW' })),
        );
        return toBudget(Attributes ?? {});
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        const found = oldItem(err);
        // The SDK resent this charge after a lost response: it was applied once, and that is it.
        if (found?.[attr.lastChargeId] === chargeId) return toBudget(found);
        throw chargeRefusal(charge, found);
      }
    },

    async get(tenant: string, runId: string, consistent = false): Promise<Budget | null> {
      const { Item } = await doc.send(
        new GetCommand({ TableName: tableName, Key: keys.budget(tenant, runId), ConsistentRead: consistent }),
      );
      return Item ? toBudget(Item) : null;
    },
  };
}

export type BudgetStore = ReturnType<typeof createBudgetStore>;
