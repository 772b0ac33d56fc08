/** The budget ledger: a charge is ONE conditional update, never read-modify-write. */
import { randomUUID } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { BudgetExceeded, ClaimLost, RunNotFound } from '../domain/errors.ts';
import type { Budget } from '../domain/run.ts';
import { attr } from '../table/attributes.ts';
import { toBudget, toClaim } from '../table/codec.ts';
import { conditions } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import { stored } from '../table/stored-results.ts';
import type { StoreDeps } from './deps.ts';
import type { Idempotency, IdempotencyKey } from './idempotency.ts';
import { metered, type TableReads } from './reads.ts';
import { fence } from './runs/claim-writes.ts';
import { ConditionFailed, rowAfter, type TransactItem, type Write, write } from './write.ts';

export interface Charge {
  tenant: string;
  runId: string;
  amount: number;
  /** Only while this token is the run's live claim (ClaimLost otherwise). */
  fencingToken?: number;
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

export function createBudgetStore(deps: StoreDeps, idempotency: Idempotency) {
  const { doc, tableName, now } = deps;
  const get = async (tenant: string, runId: string, consistent = false, reads?: TableReads): Promise<Budget | null> => {
    const { Item } = await metered(doc, reads).send(
      new GetCommand({ TableName: tableName, Key: keys.budget(tenant, runId), ConsistentRead: consistent }),
    );
    return Item ? toBudget(Item) : null;
  };

  /** One charge, alone or after an idempotency claim in the same transaction, fenced when it carries a token. */
  async function chargeOnce(charge: Charge, claim?: TransactItem) {
    const chargeId = randomUUID();
    const at = now();
    const writes: Write[] = [{ Update: chargeUpdate(tableName, charge, at, chargeId) }];
    if (charge.fencingToken !== undefined) writes.push(fence(tableName, charge.tenant, charge.runId, charge.fencingToken, at.getTime()));
    try {
      return await write(deps, writes, claim, { operation: 'charge' });
    } catch (err) {
      if (!(err instanceof ConditionFailed)) throw err;
      // A superseded worker learns that first, also when the charge would pass the cap; a run
      // that does not exist (no budget row) is not found, fenced or not, as an append's is.
      const fenceFailed = err.failedAt(1);
      if (fenceFailed && !err.missingAt(0)) throw new ClaimLost(charge.runId, toClaim(fenceFailed.item), at.getTime(), charge.fencingToken);
      // The SDK resent this charge after a lost response: it was applied once, and that is it.
      if (err.item?.[attr.lastChargeId] === chargeId) return err.item;
      throw chargeRefusal(charge, err.item);
    }
  }

  return {
    get,

    /**
     * @throws BudgetExceeded when the charge would pass the cap (nothing is charged)
     * @throws RunNotFound when the run does not exist
     * @throws IdempotencyConflict when the key was used for a different request
     */
    async charge(charge: Charge, idem?: IdempotencyKey): Promise<Budget> {
      if (!idem) {
        const row = await chargeOnce(charge);
        // A fenced charge is a transaction, which returns no row: the budget is read after it.
        if (!row && charge.fencingToken !== undefined) {
          const budget = await get(charge.tenant, charge.runId, true);
          if (!budget) throw new RunNotFound(charge.runId);
          return budget;
        }
        return toBudget(rowAfter(row, `charging run ${charge.runId}`));
      }
      return idempotency.once(idem, {
        perform: async (claim) => void (await chargeOnce(charge, claim())),
        // The charge was applied: a budget row gone since means its run is gone.
        readResult: async () => {
          const budget = await get(charge.tenant, charge.runId, true);
          if (!budget) throw new RunNotFound(charge.runId);
          return budget;
        },
        encode: (budget) => budget,
        decode: stored.budget,
      });
    },
  };
}

export type BudgetStore = ReturnType<typeof createBudgetStore>;
