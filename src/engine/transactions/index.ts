/**
 * TransactWriteItems and TransactGetItems. A transaction locks every item it touches (the
 * same locks single writes take), evaluates every condition against the stored items, and
 * only if all pass writes everything in one LevelDB batch. One that cannot get its locks
 * in time is cancelled with TransactionConflict, as DynamoDB cancels under contention.
 */
import { createHash } from 'node:crypto';
import { dynaliteDb, type Item, type LevelOp, runAction, type TableDescription, toEngineError, validateWith } from '../dynalite.ts';
import { EngineError, errors, isConditionalFailure } from '../errors.ts';
import { LockConflict, lockId } from '../item-locks.ts';
import type { RequestContext } from '../request-context.ts';
import { type Storage, WriteSet } from '../write-set.ts';
import { MAX_TRANSACTION_BYTES, prepareReads, prepareWrites, tooLarge, type WriteAction } from './actions.ts';
import { getSpec, operationOf, writeSpec } from './specs.ts';
import { createTokens } from './tokens.ts';

interface Reason {
  Code: string;
  Message?: string;
  Item?: Item;
}

const conflictReason = { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' };

export function createTransactions(storage: Storage, now: () => number, maxPendingTokens?: number) {
  const { store } = storage;
  const tokens = createTokens(store.db, now, maxPendingTokens);

  /**
   * Takes the locks of every item, then waits out an injected stall.
   * @throws TransactionCanceledException with TransactionConflict for the item not granted in time
   */
  async function lockAll(actions: { table: TableDescription; lockKey: string }[], { stall }: RequestContext) {
    const ids = actions.map(({ table, lockKey }) => lockId(table.TableName, lockKey));
    let release: () => void;
    try {
      release = await storage.locks.acquire(ids);
    } catch (err) {
      if (!(err instanceof LockConflict)) throw err;
      throw errors.transactionCanceled(ids.map((id) => (id === err.key ? conflictReason : { Code: 'None' })));
    }
    try {
      await stall?.();
    } catch (err) {
      release();
      throw err;
    }
    return release;
  }

  async function evaluate(action: WriteAction, writeSet: WriteSet): Promise<Reason | undefined> {
    try {
      if (action.kind === 'ConditionCheck') {
        const current = await new Promise<Item | undefined>((resolve, reject) =>
          writeSet.store.getItemDb(action.table.TableName).get(action.lockKey, (err, item) => (err ? reject(err) : resolve(item))),
        );
        let failed: unknown;
        try {
          failed = dynaliteDb.checkConditional(action.data, current);
        } catch {
          // A comparison dynalite cannot evaluate on this item is false, as in DynamoDB.
          failed = errors.conditionalCheckFailed();
        }
        if (failed) throw toEngineError(failed);
      } else {
        await writeSet.run(operationOf[action.kind], action.data);
      }
      return undefined;
    } catch (err) {
      if (isConditionalFailure(err)) {
        const old = action.returnOld ? writeSet.readItem(action.table, action.key) : undefined;
        return { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', ...(old ? { Item: old } : {}) };
      }
      if (err instanceof EngineError && err.code === 'ValidationException') return { Code: 'ValidationError', Message: err.message };
      throw err;
    }
  }

  /** Runs the transaction; `alongside` (its token) is committed in the same batch as its writes. */
  async function execute(data: Record<string, unknown>, context: RequestContext, alongside: LevelOp[] = []) {
    const actions = await prepareWrites(store, data.TransactItems as Record<string, Record<string, unknown>>[]);
    const unlock = await lockAll(actions, context);
    try {
      const writeSet = new WriteSet(storage, 'transaction');
      const reasons: (Reason | undefined)[] = [];
      // Every condition is checked against the stored items before anything is written.
      for (const action of actions) reasons.push(await evaluate(action, writeSet));
      if (reasons.some(Boolean)) throw errors.transactionCanceled(reasons.map((r) => r ?? { Code: 'None' }));
      // Updates are measured once applied: the items they leave count toward the limit.
      const bytes = writeSet.stagedItemBytes();
      if (bytes > MAX_TRANSACTION_BYTES) throw tooLarge(bytes);
      await writeSet.commit(alongside);
    } finally {
      unlock();
    }
    return {};
  }

  /**
   * TransactWriteItems, all or nothing. A repeated ClientRequestToken within 10 minutes
   * returns the first call's result without applying anything again.
   */
  async function write(body: Record<string, unknown>, context: RequestContext) {
    const data = validateWith(writeSpec, body, store);
    const token = data.ClientRequestToken as string | undefined;
    if (!token) return execute(data, context);
    const { ClientRequestToken: _, ...request } = body;
    const hash = createHash('sha256').update(JSON.stringify(request)).digest('hex');
    const claim = await tokens.claim(token, hash);
    if ('result' in claim) return claim.result;
    try {
      return await execute(data, context, claim.ops);
    } finally {
      claim.release();
    }
  }

  /** TransactGetItems: every item read under its lock, so no transaction is seen half applied. */
  async function get(body: Record<string, unknown>, context: RequestContext) {
    const data = validateWith(getSpec, body, store);
    const reads = await prepareReads(store, data.TransactItems as { Get: Record<string, unknown> }[]);
    const unlock = await lockAll(reads, context);
    try {
      const responses = await Promise.all(reads.map((r) => runAction('GetItem', store, r.data)));
      const bytes = responses.reduce((sum, { Item }) => sum + (Item ? dynaliteDb.itemSize(Item as Item) : 0), 0);
      if (bytes > MAX_TRANSACTION_BYTES) throw tooLarge(bytes);
      return { Responses: responses.map(({ Item }) => (Item ? { Item } : {})) };
    } finally {
      unlock();
    }
  }

  return { write, get, pruneTokens: tokens.prune, tokenStats: tokens.stats };
}
