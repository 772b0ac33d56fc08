/**
 * TransactWriteItems and TransactGetItems. A transaction locks every item it touches (the
 * same locks single writes take), evaluates every condition against the stored items, and
 * only if all pass writes everything in one LevelDB batch. One that cannot get its locks
 * in time is cancelled with TransactionConflict, as DynamoDB cancels under contention.
 */
import { createHash } from 'node:crypto';
import {
  askedFor,
  consumedCapacity,
  type Line,
  type ReturnConsumedCapacity,
  tablePartition,
  throttledReason,
  unchangedWriteLines,
  writeLines,
} from '../capacity/index.ts';
import { dynaliteDb, type Item, type LevelOp, runAction, type TableDescription, validateWith } from '../dynalite.ts';
import { EngineError, errors, isConditionalFailure } from '../errors.ts';
import { LockConflict, lockId } from '../item-locks.ts';
import type { RequestContext } from '../request-context.ts';
import { conditionHolds, type Storage, WriteSet } from '../write-set.ts';
import { MAX_TRANSACTION_BYTES, prepareReads, prepareWrites, tooLarge, type WriteAction } from './actions.ts';
import { createMemoryTokens } from './memory-tokens.ts';
import { getSpec, operationOf, writeSpec } from './specs.ts';
import { createTokens } from './tokens.ts';

interface Reason {
  Code: string;
  Message?: string;
  Item?: Item;
}

const conflictReason = { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' };

const isValidationError = (err: unknown) => err instanceof EngineError && err.code === 'ValidationException';

export interface TransactionOptions {
  /** Transactions with a ClientRequestToken in flight at once (default MAX_PENDING_TOKENS). */
  maxPendingTokens?: number;
  /** Whether the store's data is in memory only: its tokens are then kept in a map, not in LevelDB. */
  inMemory?: boolean;
}

export function createTransactions(storage: Storage, now: () => number, options: TransactionOptions = {}) {
  const { store, throughput } = storage;
  const tokens = options.inMemory
    ? createMemoryTokens(now, options.maxPendingTokens)
    : createTokens(store.db, now, options.maxPendingTokens);

  /**
   * Takes a transaction's units (every item counted twice, DynamoDB's prepare and commit).
   * @throws TransactionCanceledException with a throttling reason for each action whose partition is short
   */
  function take(kind: 'read' | 'write', lines: Line[], actions: number) {
    const short = throughput?.take(kind, lines) ?? [];
    if (short.length === 0) return;
    throw errors.transactionCanceled(
      Array.from({ length: actions }, (_, i) => {
        const line = short.find((l) => l.action === i);
        return line ? throttledReason(line) : { Code: 'None' };
      }),
    );
  }

  /** What each action consumed: its change, or (a check, a refused condition) the item it found. */
  function writeUnitsOf(actions: WriteAction[], writeSet: WriteSet) {
    const staged = new Map(writeSet.staged().map((change) => [`${change.tableName}\u0000${change.itemKey}`, change]));
    return actions.flatMap((action, i) => {
      const change = staged.get(`${action.table.TableName}\u0000${action.lockKey}`);
      if (change) return writeLines(action.table, change.oldItem, change.newItem, 2, i);
      const put = action.kind === 'Put' ? (action.data.Item as Item) : undefined;
      return unchangedWriteLines(action.table, action.key, writeSet.readItem(action.table, action.key), put, 2, i);
    });
  }

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
        if (!conditionHolds(action.data, await writeSet.itemAt(action.table, action.lockKey))) throw errors.conditionalCheckFailed();
      } else if (action.kind === 'Put') {
        await writeSet.putItem(action.table, action.lockKey, action.data);
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

  /** The actions of the request, or the refusal DynamoDB would give it. */
  const prepare = (data: Record<string, unknown>) => prepareWrites(store, data.TransactItems as Record<string, Record<string, unknown>>[]);

  /**
   * Runs the transaction's actions. Its token's `ops` are committed in the same batch as its
   * writes, and `landed` is told as soon as that batch is.
   */
  async function execute(
    data: Record<string, unknown>,
    actions: WriteAction[],
    context: RequestContext,
    token: { ops: LevelOp[]; landed(): void } = { ops: [], landed() {} },
  ) {
    const unlock = await lockAll(actions, context);
    try {
      const writeSet = new WriteSet(storage, 'transaction');
      await writeSet.readAheadItems(actions.map(({ table, lockKey }) => ({ tableName: table.TableName, key: lockKey })));
      const reasons: (Reason | undefined)[] = [];
      // Every condition is checked against the stored items before anything is written.
      for (const action of actions) reasons.push(await evaluate(action, writeSet));
      const asked = askedFor(data.ReturnConsumedCapacity);
      const lines = throughput || asked ? writeUnitsOf(actions, writeSet) : undefined;
      // A cancelled transaction consumes capacity too; past a partition's, it is cancelled as throttled.
      if (lines) take('write', lines, actions.length);
      if (reasons.some(Boolean)) throw errors.transactionCanceled(reasons.map((r) => r ?? { Code: 'None' }));
      // Updates are measured once applied: the items they leave count toward the limit (Puts were, as sent).
      const bytes = actions.some((action) => action.kind === 'Update') ? writeSet.stagedItemBytes() : 0;
      if (bytes > MAX_TRANSACTION_BYTES) throw tooLarge(bytes);
      await writeSet.commit(token.ops);
      token.landed();
      return answer(lines, asked);
    } finally {
      unlock();
    }
  }

  const answer = (lines: Line[] | undefined, asked: ReturnConsumedCapacity | undefined) =>
    lines && asked ? { ConsumedCapacity: consumedCapacity(lines, asked) } : {};

  /**
   * TransactWriteItems, all or nothing. A repeated ClientRequestToken within 10 minutes
   * returns the first call's result without applying anything again.
   */
  async function write(body: Record<string, unknown>, context: RequestContext) {
    const data = validateWith(writeSpec, body, store);
    const token = data.ClientRequestToken as string | undefined;
    if (!token) return execute(data, await prepare(data), context);
    const { ClientRequestToken: _, ...request } = body;
    const hash = createHash('sha256').update(JSON.stringify(request)).digest('hex');
    // The token is looked up while the actions are prepared (neither writes anything). A request
    // whose token is in flight is refused, and an answered one answered, without touching its
    // items: only a transaction that is to run takes their locks.
    const prepared = prepare(data);
    // Awaited below on every path that needs it; until then its refusal must not go unhandled.
    prepared.catch(() => undefined);
    // A request that is not valid is refused as such, whatever its token says (DynamoDB validates first).
    const invalid = () =>
      prepared.then(
        () => undefined,
        (reason: unknown) => (isValidationError(reason) ? reason : undefined),
      );
    let claim: Awaited<ReturnType<typeof tokens.claim>>;
    try {
      claim = await tokens.claim(token, hash);
    } catch (err) {
      throw (await invalid()) ?? err;
    }
    if ('result' in claim) {
      const refusal = await invalid();
      if (refusal) throw refusal;
      return claim.result;
    }
    try {
      return await execute(data, await prepared, context, claim);
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
      const asked = askedFor(data.ReturnConsumedCapacity);
      const metered = Boolean(throughput || asked);
      // dynalite counts a strongly consistent read of each whole item; a transaction reads twice.
      const counted = (r: (typeof reads)[number]) =>
        metered ? { ...r.data, ReturnConsumedCapacity: 'TOTAL', ConsistentRead: true } : r.data;
      const responses = await Promise.all(reads.map((r) => runAction('GetItem', store, counted(r))));
      const lines = metered
        ? reads.map((r, i): Line => {
            const units = (responses[i]?.ConsumedCapacity as { CapacityUnits: number } | undefined)?.CapacityUnits ?? 1;
            return { table: r.table, partition: tablePartition(r.table, r.data.Key as Item), units: units * 2, action: i };
          })
        : undefined;
      if (lines) take('read', lines, reads.length);
      const bytes = responses.reduce((sum, { Item }) => sum + (Item ? dynaliteDb.itemSize(Item as Item) : 0), 0);
      if (bytes > MAX_TRANSACTION_BYTES) throw tooLarge(bytes);
      return { Responses: responses.map(({ Item }) => (Item ? { Item } : {})), ...answer(lines, asked) };
    } finally {
      unlock();
    }
  }

  return { write, get, pruneTokens: tokens.prune, tokenStats: tokens.stats, close: tokens.close };
}
