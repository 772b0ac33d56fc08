/**
 * Turning a transaction's members into actions, checked in DynamoDB's order: every member's
 * own shape and expressions first, then the tables, then empty key values, duplicate items
 * and the 4 MB limit (each refusing the whole request), and last keys of the wrong shape,
 * which DynamoDB reports as a `ValidationError` cancellation reason of that action.
 */
import { dynaliteDb, getTable, type Item, type Store, type TableDescription, toEngineError, validateTyped } from '../dynalite.ts';
import { EngineError, errors } from '../errors.ts';
import { keptTable } from '../table-cache.ts';
import { operationOf, type WriteKind } from './specs.ts';

/** DynamoDB's limit on the aggregate size of the items in one transaction (4 MB, in its 1024-based units). */
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;

export interface WriteAction {
  kind: WriteKind;
  /** The member as validated by dynalite for the matching single-item operation (expressions parsed). */
  data: Record<string, unknown>;
  table: TableDescription;
  key: Item;
  lockKey: string;
  returnOld: boolean;
}

export interface ReadAction {
  data: Record<string, unknown>;
  table: TableDescription;
  lockKey: string;
}

interface Checked {
  data: Record<string, unknown>;
  table: TableDescription;
  key: Item;
  /** What is wrong with the key's shape (DynamoDB's message), if anything. */
  problem?: string;
}

export const tooLarge = (bytes: number) =>
  errors.validation(
    `The aggregate size of the items in the transaction exceeds the limit of 4 MB (${MAX_TRANSACTION_BYTES} bytes): it is ${bytes} bytes`,
  );

/** Empty key values are refused up front, for the whole request, as DynamoDB does. */
function refuseEmptyKey(key: Item, table: TableDescription) {
  for (const { AttributeName } of table.KeySchema) {
    const value = key[AttributeName] as { S?: string; B?: string } | undefined;
    if (value?.S !== '' && value?.B !== '') continue;
    throw errors.validation(
      'One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty ' +
        `${value.S === '' ? 'string' : 'binary'} value. Key: ${AttributeName}`,
    );
  }
}

/** dynalite's message for a key of the wrong type, count or size (a Put's item words it as PutItem does). */
function keyProblem(isItem: boolean, key: Item, table: TableDescription) {
  const invalid = isItem ? dynaliteDb.validateItem(key, table) : dynaliteDb.validateKey(key, table);
  if (!invalid) return undefined;
  const err = toEngineError(invalid);
  return err instanceof EngineError ? err.message : String(invalid);
}

/**
 * The members' tables, each looked up once and all at the same time (a transaction's members
 * are mostly on one table), without a turn of the event loop when all are kept (the
 * transaction has its reads and commit to come). A missing one refuses the request: the
 * first member's that is.
 */
async function tablesOf(store: Store, members: Record<string, unknown>[]) {
  const names = [...new Set(members.map((data) => data.TableName as string))];
  const kept = names.map((name) => keptTable(store, name));
  if (kept.every(Boolean)) return new Map(names.map((name, i) => [name, kept[i] as TableDescription]));
  const found = await Promise.allSettled(names.map((name) => getTable(store, name)));
  const tables = new Map<string, TableDescription>();
  for (const [i, result] of found.entries()) {
    if (result.status === 'rejected') throw result.reason;
    tables.set(names[i] as string, result.value);
  }
  return tables;
}

/**
 * Every member's expressions parse (all of them) before any table is looked up. The members'
 * types were checked with the request (specs.ts gives each member its operation's types).
 */
async function check(
  store: Store,
  members: { operation: Parameters<typeof validateTyped>[0]; request: Record<string, unknown>; isItem: boolean }[],
) {
  const validated = members.map(({ operation, request }) => validateTyped(operation, request, store));
  const tables = await tablesOf(store, validated);
  const checked: Checked[] = [];
  for (const [i, data] of validated.entries()) {
    const { isItem } = members[i] as (typeof members)[number];
    const table = tables.get(data.TableName as string) as TableDescription;
    const key = (isItem ? data.Item : data.Key) as Item;
    refuseEmptyKey(key, table);
    checked.push({ data, table, key, problem: keyProblem(isItem, key, table) });
  }
  // Two actions on one item are refused, whatever they are.
  const seen = new Set<string>();
  const lockKeys = checked.map(({ table, key, problem }) => {
    if (problem) return '';
    const lockKey = dynaliteDb.createKey(key, table);
    if (seen.has(`${table.TableName}\u0000${lockKey}`)) {
      throw errors.validation('Transaction request cannot include multiple operations on one item');
    }
    seen.add(`${table.TableName}\u0000${lockKey}`);
    return lockKey;
  });
  return { checked, lockKeys };
}

/** Cancels the transaction when a key has the wrong shape: that action's reason says why. */
function cancelOnKeyProblems(checked: Checked[]) {
  if (!checked.some((c) => c.problem)) return;
  throw errors.transactionCanceled(
    checked.map(({ problem }) => (problem ? { Code: 'ValidationError', Message: problem } : { Code: 'None' })),
  );
}

/** The actions of a TransactWriteItems request, or the refusal DynamoDB would give it. */
export async function prepareWrites(store: Store, members: Record<string, Record<string, unknown> | undefined>[]): Promise<WriteAction[]> {
  const parts = members.map((member) => {
    const kinds = (Object.keys(member) as WriteKind[]).filter((k) => member[k] != null);
    const kind = kinds[0];
    if (kinds.length !== 1 || !kind) throw errors.validation('TransactItems can only contain one of Check, Put, Update or Delete');
    const { ReturnValuesOnConditionCheckFailure, ...request } = member[kind] as Record<string, unknown>;
    return {
      kind,
      request,
      operation: operationOf[kind],
      isItem: kind === 'Put',
      returnOld: ReturnValuesOnConditionCheckFailure === 'ALL_OLD',
    };
  });
  const { checked, lockKeys } = await check(store, parts);
  // What the request says is written: Put items whole, the other actions' keys.
  const bytes = checked.reduce((sum, { key }) => sum + dynaliteDb.itemSize(key), 0);
  if (bytes > MAX_TRANSACTION_BYTES) throw tooLarge(bytes);
  cancelOnKeyProblems(checked);
  return checked.map(({ data, table, key }, i) => {
    const { kind, returnOld } = parts[i] as (typeof parts)[number];
    return { kind, data, table, key, lockKey: lockKeys[i] as string, returnOld };
  });
}

/** The reads of a TransactGetItems request, or the refusal DynamoDB would give it. */
export async function prepareReads(store: Store, members: { Get: Record<string, unknown> }[]): Promise<ReadAction[]> {
  const { checked, lockKeys } = await check(
    store,
    members.map(({ Get }) => ({ operation: 'GetItem' as const, request: Get, isItem: false })),
  );
  cancelOnKeyProblems(checked);
  return checked.map(({ data, table }, i) => ({ data, table, lockKey: lockKeys[i] as string }));
}
