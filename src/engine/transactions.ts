/**
 * TransactWriteItems and TransactGetItems. A transaction locks every item it touches (with
 * dynalite's own per-item locks, so single writes wait for it), evaluates every condition
 * against the stored items, and only if all pass writes everything in one LevelDB batch.
 */
import { createHash } from 'node:crypto';
import {
  dynaliteDb,
  getTable,
  type Item,
  requestTypes,
  runAction,
  type Store,
  type TableDescription,
  toEngineError,
  validate,
  validateWith,
} from './dynalite.ts';
import { EngineError, errors, isConditionalFailure } from './errors.ts';
import { returnValuesOnFailureSpec } from './items.ts';
import type { StreamLog } from './streams/log.ts';
import { WriteSet } from './write-set.ts';

/** DynamoDB remembers a ClientRequestToken for 10 minutes. */
const TOKEN_TTL_MS = 10 * 60 * 1000;

function pick(types: Record<string, unknown>, names: string[]) {
  return Object.fromEntries(names.map((name) => [name, types[name]]));
}

const expressionMembers = ['TableName', 'ConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues'];
const member = (type: string, children: Record<string, unknown>, required: string[] = []) => ({
  type: `FieldStruct<${type}>`,
  children: {
    ...children,
    ...Object.fromEntries(required.map((name) => [name, { ...(children[name] as object), notNull: true }])),
    ReturnValuesOnConditionCheckFailure: returnValuesOnFailureSpec,
  },
});
const writeSpec = {
  types: {
    TransactItems: {
      type: 'List',
      notNull: true,
      lengthGreaterThanOrEqual: 1,
      lengthLessThanOrEqual: 100,
      children: {
        type: 'ValueStruct<TransactWriteItem>',
        children: {
          ConditionCheck: member('ConditionCheck', pick(requestTypes('DeleteItem'), ['Key', ...expressionMembers]), [
            'ConditionExpression',
          ]),
          Put: member('Put', pick(requestTypes('PutItem'), ['Item', ...expressionMembers])),
          Delete: member('Delete', pick(requestTypes('DeleteItem'), ['Key', ...expressionMembers])),
          Update: member('Update', pick(requestTypes('UpdateItem'), ['Key', 'UpdateExpression', ...expressionMembers]), [
            'UpdateExpression',
          ]),
        },
      },
    },
    ClientRequestToken: { type: 'String', lengthGreaterThanOrEqual: 1, lengthLessThanOrEqual: 36 },
    ReturnConsumedCapacity: { type: 'String', enum: ['INDEXES', 'TOTAL', 'NONE'] },
    ReturnItemCollectionMetrics: { type: 'String', enum: ['SIZE', 'NONE'] },
  },
};
const getSpec = {
  types: {
    TransactItems: {
      type: 'List',
      notNull: true,
      lengthGreaterThanOrEqual: 1,
      lengthLessThanOrEqual: 100,
      children: {
        type: 'ValueStruct<TransactGetItem>',
        children: {
          Get: {
            type: 'FieldStruct<Get>',
            notNull: true,
            children: pick(requestTypes('GetItem'), ['Key', 'TableName', 'ProjectionExpression', 'ExpressionAttributeNames']),
          },
        },
      },
    },
    ReturnConsumedCapacity: { type: 'String', enum: ['INDEXES', 'TOTAL', 'NONE'] },
  },
};

type WriteKind = 'ConditionCheck' | 'Put' | 'Delete' | 'Update';
const operationOf = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'DeleteItem' } as const;

interface Action {
  kind: WriteKind;
  /** The member as validated by dynalite for the matching single-item operation (expressions parsed). */
  data: Record<string, unknown>;
  table: TableDescription;
  key: Item;
  lockKey: string;
  returnOld: boolean;
}

interface Reason {
  Code: string;
  Message?: string;
  Item?: Item;
}

export function createTransactions(store: Store, log: StreamLog, now: () => number) {
  const tokens = new Map<string, { hash: string; done: boolean; at: number; result: Record<string, unknown> }>();

  async function prepare(items: Record<string, Record<string, unknown> | undefined>[]) {
    const actions: Action[] = [];
    const seen = new Set<string>();
    for (const item of items) {
      const kinds = (Object.keys(item) as WriteKind[]).filter((k) => item[k] != null);
      const kind = kinds[0];
      if (kinds.length !== 1 || !kind) throw errors.validation('TransactItems can only contain one of Check, Put, Update or Delete');
      const { ReturnValuesOnConditionCheckFailure, ...request } = item[kind] as Record<string, unknown>;
      const data = validate(operationOf[kind], request, store);
      const table = await getTable(store, data.TableName as string);
      const key = (kind === 'Put' ? data.Item : data.Key) as Item;
      const invalid = kind === 'Put' ? dynaliteDb.validateItem(key, table) : dynaliteDb.validateKey(key, table);
      if (invalid) throw toEngineError(invalid);
      const lockKey = dynaliteDb.createKey(key, table);
      if (seen.has(`${table.TableName}\u0000${lockKey}`)) {
        throw errors.validation('Transaction request cannot include multiple operations on one item');
      }
      seen.add(`${table.TableName}\u0000${lockKey}`);
      actions.push({ kind, data, table, key, lockKey, returnOld: ReturnValuesOnConditionCheckFailure === 'ALL_OLD' });
    }
    return actions;
  }

  /** Takes dynalite's item locks on every key, table by table in name order (so two transactions never deadlock). */
  async function lockAll(keys: { table: TableDescription; lockKey: string }[]) {
    const byTable = new Map<string, string[]>();
    for (const { table, lockKey } of keys) byTable.set(table.TableName, [...(byTable.get(table.TableName) ?? []), lockKey]);
    const releases: (() => void)[] = [];
    for (const tableName of [...byTable.keys()].sort()) {
      releases.push(
        await new Promise<() => void>((resolve) =>
          store.getItemDb(tableName).lock(byTable.get(tableName) as string[], (release) => resolve(release(() => undefined))),
        ),
      );
    }
    return () => {
      for (const release of releases.reverse()) release();
    };
  }

  async function evaluate(action: Action, writeSet: WriteSet): Promise<Reason | undefined> {
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

  async function execute(data: Record<string, unknown>) {
    const actions = await prepare(data.TransactItems as Record<string, Record<string, unknown>>[]);
    const unlock = await lockAll(actions);
    try {
      const writeSet = new WriteSet(store, log, 'transaction');
      const reasons: (Reason | undefined)[] = [];
      // Every condition is checked against the stored items before anything is written.
      for (const action of actions) reasons.push(await evaluate(action, writeSet));
      if (reasons.some(Boolean)) throw errors.transactionCanceled(reasons.map((r) => r ?? { Code: 'None' }));
      await writeSet.commit();
    } finally {
      unlock();
    }
    return {};
  }

  /**
   * TransactWriteItems, all or nothing. A repeated ClientRequestToken within 10 minutes
   * returns the first call's result without applying anything again.
   */
  async function write(body: Record<string, unknown>) {
    const data = validateWith(writeSpec, body, store);
    const token = data.ClientRequestToken as string | undefined;
    if (!token) return execute(data);

    const at = now();
    for (const [t, entry] of tokens) if (entry.done && at - entry.at > TOKEN_TTL_MS) tokens.delete(t);
    const { ClientRequestToken: _, ...request } = body;
    const hash = createHash('sha256').update(JSON.stringify(request)).digest('hex');
    const previous = tokens.get(token);
    if (previous) {
      if (previous.hash !== hash) throw errors.idempotentParameterMismatch();
      if (!previous.done) throw errors.transactionInProgress();
      return previous.result;
    }
    tokens.set(token, { hash, done: false, at, result: {} });
    try {
      const result = await execute(data);
      tokens.set(token, { hash, done: true, at: now(), result });
      return result;
    } catch (err) {
      tokens.delete(token);
      throw err;
    }
  }

  /** TransactGetItems: every item read under its lock, so no transaction is seen half applied. */
  async function get(body: Record<string, unknown>) {
    const data = validateWith(getSpec, body, store);
    const reads: { data: Record<string, unknown>; table: TableDescription; lockKey: string }[] = [];
    for (const item of data.TransactItems as { Get: Record<string, unknown> }[]) {
      const request = validate('GetItem', item.Get, store);
      const table = await getTable(store, request.TableName as string);
      const invalid = dynaliteDb.validateKey(request.Key as Item, table);
      if (invalid) throw toEngineError(invalid);
      reads.push({ data: request, table, lockKey: dynaliteDb.createKey(request.Key as Item, table) });
    }
    const unique = [...new Map(reads.map((r) => [`${r.table.TableName}\u0000${r.lockKey}`, r])).values()];
    const unlock = await lockAll(unique);
    try {
      const responses = await Promise.all(reads.map((r) => runAction('GetItem', store, r.data)));
      return { Responses: responses.map(({ Item }) => (Item ? { Item } : {})) };
    } finally {
      unlock();
    }
  }

  return { write, get };
}
