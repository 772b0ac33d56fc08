/** Single-item writes (PutItem, UpdateItem, DeleteItem) and BatchWriteItem, each change with its stream record. */
import { admit, askedFor, consumedCapacity, isThrottled, type Line, unchangedWriteLines, writeLines } from './capacity/index.ts';
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

export interface ItemWriteOptions extends Omit<WriteSetOptions, 'beforeCommit'> {
  /** The region the client signed for (the ARNs of a throttling refusal are in it). */
  region?: string;
}

type BatchRequest = { PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } };

export function createItemWrites(storage: Storage) {
  const { store, throughput } = storage;

  /**
   * Runs one item write through dynalite's action, committing the change and its stream
   * record together. Metered (its units counted, and taken from its partitions' buckets when
   * the throughput model is on) only when the model is on or the request asks for its units.
   * @throws EngineError ConditionalCheckFailedException (with `Item` when `returnOld`), or a
   *   throttling refusal, in which case nothing was written
   */
  async function runOne(
    operation: ItemWriteOperation,
    data: Record<string, unknown>,
    options: ItemWriteOptions,
    returnOld = false,
  ): Promise<{ result: Record<string, unknown>; lines?: Line[] }> {
    if ((throughput || askedFor(data.ReturnConsumedCapacity)) && !options.byTtl) return runMetered(operation, data, options, returnOld);
    const writeSet = new WriteSet(storage, 'single', options);
    try {
      return { result: await writeSet.run(operation, data) };
    } catch (err) {
      if (!returnOld || !isConditionalFailure(err)) throw err;
      const table = await getTable(store, data.TableName as string);
      throw errors.conditionalCheckFailed(writeSet.readItem(table, (data.Key ?? data.Item) as Item));
    }
  }

  async function runMetered(operation: ItemWriteOperation, data: Record<string, unknown>, options: ItemWriteOptions, returnOld: boolean) {
    const region = options.region ?? '';
    let lines: Line[] | undefined;
    const writeSet = new WriteSet(storage, 'single', {
      ...options,
      beforeCommit(changes, tableOf) {
        const found = changes.flatMap((change) => {
          const table = tableOf(change.tableName);
          return table ? writeLines(table, change.oldItem, change.newItem, 1) : [];
        });
        admit(throughput, 'write', found, region);
        lines = found;
      },
    });
    /** What a write that changed nothing consumed. */
    const unchanged = async () => {
      const table = writeSet.tableOf(data.TableName as string) ?? (await getTable(store, data.TableName as string));
      const key = (data.Key ?? data.Item) as Item;
      const put = operation === 'PutItem' ? (data.Item as Item) : undefined;
      return { table, key, lines: unchangedWriteLines(table, key, writeSet.readItem(table, key), put, 1) };
    };
    try {
      const result = await writeSet.run(operation, data);
      if (!lines) {
        lines = (await unchanged()).lines;
        admit(throughput, 'write', lines, region);
      }
      return { result, lines };
    } catch (err) {
      if (!isConditionalFailure(err)) throw err;
      // A refused condition consumes capacity too; past the partition's, the request is throttled instead.
      const refused = await unchanged();
      admit(throughput, 'write', refused.lines, region);
      if (returnOld) throw errors.conditionalCheckFailed(writeSet.readItem(refused.table, refused.key));
      throw err;
    }
  }

  /**
   * A PutItem, UpdateItem or DeleteItem.
   * @throws EngineError ConditionalCheckFailedException (with `Item` when asked for ALL_OLD), or a throttling refusal
   */
  async function write(operation: ItemWriteOperation, body: Record<string, unknown>, options: ItemWriteOptions = {}) {
    const onFailure = returnValuesOnFailure(body);
    const data = validate(operation, body, store);
    const { result, lines } = await runOne(operation, data, options, onFailure === 'ALL_OLD');
    const asked = askedFor(data.ReturnConsumedCapacity);
    if (asked && lines) result.ConsumedCapacity = consumedCapacity(lines, asked)[0];
    return result;
  }

  /**
   * BatchWriteItem: validated as a whole first, then each request is its own atomic write. A
   * throttled request is returned in UnprocessedItems; if all are, the batch is refused.
   */
  async function batchWrite(body: Record<string, unknown>, { stall, region }: RequestContext) {
    const data = validate('BatchWriteItem', body, store);
    const requestItems = data.RequestItems as Record<string, BatchRequest[]>;
    const writes: { tableName: string; request: BatchRequest; run: () => ReturnType<typeof runOne> }[] = [];
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
          writes.push({ tableName, request, run: () => runOne('PutItem', options, { stall, region }) });
        } else if (request.DeleteRequest) {
          throwBatchKeyError(dynaliteDb.validateKey(request.DeleteRequest.Key, table));
          options.Key = request.DeleteRequest.Key;
          key = dynaliteDb.createKey(request.DeleteRequest.Key, table);
          writes.push({ tableName, request, run: () => runOne('DeleteItem', options, { stall, region }) });
        } else {
          continue;
        }
        if (seen.has(key)) throw errors.validation('Provided list of item keys contains duplicates');
        seen.add(key);
      }
    }
    const outcomes = await Promise.all(
      writes.map(({ run }) =>
        run().then(
          (done) => ({ lines: done.lines, throttled: undefined }),
          (err: unknown) => {
            if (!isThrottled(err)) throw err;
            return { lines: undefined, throttled: err };
          },
        ),
      ),
    );
    const refused = outcomes.filter((outcome) => outcome.throttled);
    if (refused.length > 0 && refused.length === outcomes.length) throw refused[0]?.throttled;
    const unprocessed: Record<string, BatchRequest[]> = {};
    for (const [i, outcome] of outcomes.entries()) {
      if (!outcome.throttled) continue;
      const { tableName, request } = writes[i] as (typeof writes)[number];
      unprocessed[tableName] = [...(unprocessed[tableName] ?? []), request];
    }
    const response: Record<string, unknown> = { UnprocessedItems: unprocessed };
    const asked = askedFor(data.ReturnConsumedCapacity);
    if (asked)
      response.ConsumedCapacity = consumedCapacity(
        outcomes.flatMap((outcome) => outcome.lines ?? []),
        asked,
      );
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
