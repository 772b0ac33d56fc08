/** Single-item writes (PutItem, UpdateItem, DeleteItem) and BatchWriteItem, each change with its stream record. */
import { dynaliteDb, getTable, type Item, toEngineError, validate, validateWith } from './dynalite.ts';
import { EngineError, errors, isConditionalFailure } from './errors.ts';
import type { RequestContext } from './request-context.ts';
import { type Storage, WriteSet, type WriteSetOptions } from './write-set.ts';

export type ItemWriteOperation = 'PutItem' | 'UpdateItem' | 'DeleteItem';

export const returnValuesOnFailureSpec = { type: 'String', enum: ['ALL_OLD', 'NONE'] };

/** Reads ReturnValuesOnConditionCheckFailure, which dynalite does not know and would drop. */
export function returnValuesOnFailure(body: Record<string, unknown>) {
  const data = validateWith(
    { types: { ReturnValuesOnConditionCheckFailure: returnValuesOnFailureSpec } },
    { ReturnValuesOnConditionCheckFailure: body.ReturnValuesOnConditionCheckFailure },
    undefined,
  );
  return data.ReturnValuesOnConditionCheckFailure as 'ALL_OLD' | 'NONE' | undefined;
}

export function createItemWrites(storage: Storage) {
  const { store } = storage;
  /**
   * Runs one item write through dynalite's validation and action, committing the change and
   * its stream record together.
   * @throws EngineError ConditionalCheckFailedException (with `Item` when asked for ALL_OLD)
   */
  async function write(operation: ItemWriteOperation, body: Record<string, unknown>, options: WriteSetOptions = {}) {
    const onFailure = returnValuesOnFailure(body);
    const data = validate(operation, body, store);
    const writeSet = new WriteSet(storage, 'single', options);
    try {
      return await writeSet.run(operation, data);
    } catch (err) {
      if (onFailure === 'ALL_OLD' && isConditionalFailure(err)) {
        const table = await getTable(store, data.TableName as string);
        const key = (data.Key ?? data.Item) as Item;
        throw errors.conditionalCheckFailed(writeSet.readItem(table, key));
      }
      throw err;
    }
  }

  /** BatchWriteItem: validated as a whole first, then each request is its own atomic write. */
  async function batchWrite(body: Record<string, unknown>, { stall }: RequestContext) {
    const data = validate('BatchWriteItem', body, store);
    const requestItems = data.RequestItems as Record<string, { PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } }[]>;
    const writes: (() => Promise<Record<string, unknown>>)[] = [];
    for (const [tableName, requests] of Object.entries(requestItems)) {
      const table = await getTable(store, tableName);
      const seen = new Set<string>();
      for (const request of requests) {
        const options: Record<string, unknown> = { TableName: tableName, ReturnConsumedCapacity: data.ReturnConsumedCapacity };
        let key: string;
        if (request.PutRequest) {
          throwBatchKeyError(dynaliteDb.validateItem(request.PutRequest.Item, table));
          options.Item = request.PutRequest.Item;
          key = dynaliteDb.createKey(request.PutRequest.Item, table);
          writes.push(() => new WriteSet(storage, 'single', { stall }).run('PutItem', options));
        } else if (request.DeleteRequest) {
          throwBatchKeyError(dynaliteDb.validateKey(request.DeleteRequest.Key, table));
          options.Key = request.DeleteRequest.Key;
          key = dynaliteDb.createKey(request.DeleteRequest.Key, table);
          writes.push(() => new WriteSet(storage, 'single', { stall }).run('DeleteItem', options));
        } else {
          continue;
        }
        if (seen.has(key)) throw errors.validation('Provided list of item keys contains duplicates');
        seen.add(key);
      }
    }
    const results = await Promise.all(writes.map((run) => run()));
    const response: Record<string, unknown> = { UnprocessedItems: {} };
    if (data.ReturnConsumedCapacity === 'TOTAL' || data.ReturnConsumedCapacity === 'INDEXES') {
      const units = new Map<string, number>();
      for (const result of results) {
        const consumed = result.ConsumedCapacity as { TableName: string; CapacityUnits: number } | undefined;
        if (consumed) units.set(consumed.TableName, (units.get(consumed.TableName) ?? 0) + consumed.CapacityUnits);
      }
      response.ConsumedCapacity = [...units].map(([TableName, CapacityUnits]) => ({
        CapacityUnits,
        TableName,
        ...(data.ReturnConsumedCapacity === 'INDEXES' ? { Table: { CapacityUnits } } : {}),
      }));
    }
    return response;
  }

  return { write, batchWrite };
}

/** DynamoDB words key errors in a batch differently from single writes. */
function throwBatchKeyError(invalid: unknown) {
  if (invalid == null) return;
  const err = toEngineError(invalid);
  if (err instanceof EngineError && /Missing the key|Type mismatch for key/.test(err.message)) {
    throw errors.validation('The provided key element does not match the schema');
  }
  throw err;
}
