/**
 * Condition expressions, named, and the decoding of their failures. Each fragment says
 * which invariant it guards; stores join them.
 */
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Item } from './attributes.ts';

export const conditions = {
  /** The row does not exist yet (a seq, a run, a budget is taken once). */
  absent: 'attribute_not_exists(pk)',
  /** The row exists (a charge or transition on a missing run must not create it). */
  present: 'attribute_exists(pk)',
  /** Nobody has ever held the unit. */
  leaseFree: 'attribute_not_exists(pk)',
  /** The holder's time is up (#leaseUntil is epoch ms, :now the clock). */
  leaseExpired: '#leaseUntil <= :now',
  /** The caller holds it already and is extending it. */
  leaseMine: '#owner = :owner',
  /** The lease has not run out (renewing a lost lease must fail: another may have it by now). */
  leaseLive: '#leaseUntil > :now',
  /** The charge keeps spent <= cap: remaining is cap - spent, kept in the same row. */
  budgetCovers: '#remaining >= :amount',
  /** This charge (by its id) is not the last one applied: a resent charge is not applied twice. */
  notLastCharge: '(attribute_not_exists(#lastCharge) OR #lastCharge <> :chargeId)',
  /** The run is still in the status the caller saw. */
  statusIs: '#status = :from',
} as const;

export function isConditionalCheckFailed(err: unknown): err is ConditionalCheckFailedException {
  return err instanceof ConditionalCheckFailedException || (err as Error)?.name === 'ConditionalCheckFailedException';
}

/** The item a refused write found (ReturnValuesOnConditionCheckFailure: ALL_OLD), if there was one. */
export function oldItem(err: ConditionalCheckFailedException): Item | undefined {
  return err.Item ? unmarshall(err.Item as never, { wrapNumbers: false }) : undefined;
}

export function isTransactionCanceled(err: unknown): err is TransactionCanceledException {
  return err instanceof TransactionCanceledException || (err as Error)?.name === 'TransactionCanceledException';
}

/** Per action of a canceled transaction: whether its condition failed, and the item it found. */
export function cancellations(err: TransactionCanceledException) {
  return (err.CancellationReasons ?? []).map((reason) => ({
    code: reason.Code ?? 'None',
    conditionFailed: reason.Code === 'ConditionalCheckFailed',
    item: reason.Item ? (unmarshall(reason.Item as never) as Item) : undefined,
  }));
}
