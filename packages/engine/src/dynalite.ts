/**
 * The one place that reaches into dynalite 4.0.0 (pinned exactly in package.json).
 *
 * dynalite gives us the store, request validation (which is also where condition,
 * update and projection expressions get parsed) and the item actions. Every request
 * goes through `validate` before an action runs: an action called with unparsed input
 * silently ignores its ConditionExpression.
 */
import { createRequire } from 'node:module';
import { EngineError, errors } from './errors.ts';
import { keepingParses } from './parsed-expressions.ts';

const require = createRequire(import.meta.url);

/** A DynamoDB AttributeValue in its wire form ({ S: 'x' }, { N: '1' }, { M: {...} }, ...). */
export type AttributeValue = Record<string, unknown>;
export type Item = Record<string, AttributeValue>;

export interface KeySchemaElement {
  AttributeName: string;
  KeyType: 'HASH' | 'RANGE';
}

export interface TableDescription {
  TableName: string;
  TableArn: string;
  TableStatus: string;
  KeySchema: KeySchemaElement[];
  AttributeDefinitions: { AttributeName: string; AttributeType: string }[];
  GlobalSecondaryIndexes?: unknown[];
  LocalSecondaryIndexes?: unknown[];
  [field: string]: unknown;
}

export type Callback<T = unknown> = (err: Error | null | undefined, value?: T) => void;

export interface SubDb {
  lock(key: string | string[], exec: (release: <F extends (...args: never[]) => unknown>(done: F) => F) => void): void;
  get(key: string, cb: Callback<Item | undefined>): void;
  put(key: string, value: unknown, cb: Callback): void;
  del(key: string, cb: Callback): void;
  createValueStream(options?: Record<string, unknown>): NodeJS.ReadableStream;
}

export interface LevelOp {
  type: 'put' | 'del';
  key: string;
  value?: unknown;
}

export interface MainDb {
  /** Options are LevelDB's (classic-level) with --data; the in-memory store ignores them. */
  open(options?: { maxOpenFiles?: number }): Promise<void>;
  batch(ops: LevelOp[]): Promise<void>;
  put(key: string, value: unknown): Promise<void>;
  get(key: string): Promise<unknown>;
  /** Values of many keys in one read (undefined where absent). */
  getMany(keys: string[]): Promise<unknown[]>;
  values(options: { gt?: string; gte?: string; lt?: string; lte?: string; limit?: number; reverse?: boolean }): AsyncIterable<unknown>;
  keys(options: { gt?: string; gte?: string; lt?: string; lte?: string; limit?: number; reverse?: boolean }): AsyncIterable<string>;
  close(cb?: Callback): Promise<void> | undefined;
}

export interface Store {
  options: { maxItemSize: number; [option: string]: unknown };
  db: MainDb;
  tableDb: SubDb & { awsRegion: string; awsAccountId: string };
  getItemDb(table: string): SubDb;
  getIndexDb(indexType: string, table: string, index: string): SubDb;
  getTable(name: string, checkStatus: boolean | Callback<TableDescription>, cb?: Callback<TableDescription>): void;
  lifecycleManager: { gracefulClose(cb: Callback): void };
}

interface Validation {
  types: Record<string, unknown>;
  custom?: (data: Record<string, unknown>, store: Store) => string | undefined;
}

interface DbModule {
  create(options: Record<string, unknown>): Store;
  createKey(item: Item, table: TableDescription, keySchema?: KeySchemaElement[]): string;
  validateKey(key: Item, table: TableDescription): DynaliteError | undefined;
  validateItem(item: Item, table: TableDescription): DynaliteError | undefined;
  checkConditional(data: Record<string, unknown>, existing: Item | undefined): DynaliteError | undefined | null;
  /** The index entries an item's change adds and removes (keys as the index sub-databases store them). */
  getIndexActions(
    indexes: unknown[],
    oldItem: Item | undefined,
    newItem: Item | undefined,
    table: TableDescription,
  ): { puts: { index: string; key: string; item: Item }[]; deletes: { index: string; key: string }[] };
  itemSize(item: Item): number;
  mapPaths(paths: unknown, item: Item): Item;
}

interface ValidationsModule {
  validateAttributeValue(value: unknown): string | undefined | null;
  validateExpressions(data: Record<string, unknown>, expressions?: string[]): string | undefined;
  checkTypes(data: Record<string, unknown>, types: Record<string, unknown>): Record<string, unknown>;
  checkValidations(
    data: Record<string, unknown>,
    types: Record<string, unknown>,
    custom: Validation['custom'],
    store: Store | undefined,
  ): void;
}

interface DynaliteError extends Error {
  statusCode?: number;
  body?: { __type: string; message?: string; Message?: string };
}

type Action = (store: Store, data: Record<string, unknown>, cb: Callback<Record<string, unknown>>) => void;

export const dynaliteDb: DbModule = require('dynalite/db/index.js');
const validations: ValidationsModule = require('dynalite/validations/index.js');
// Every action's validation calls it through the module: parses are kept from here on.
validations.validateExpressions = keepingParses(validations.validateExpressions, validations.validateAttributeValue);

const actionNames = {
  BatchGetItem: 'batchGetItem',
  BatchWriteItem: 'batchWriteItem',
  CreateTable: 'createTable',
  DeleteItem: 'deleteItem',
  DeleteTable: 'deleteTable',
  DescribeTable: 'describeTable',
  DescribeTimeToLive: 'describeTimeToLive',
  GetItem: 'getItem',
  ListTables: 'listTables',
  PutItem: 'putItem',
  Query: 'query',
  Scan: 'scan',
  TagResource: 'tagResource',
  UntagResource: 'untagResource',
  ListTagsOfResource: 'listTagsOfResource',
  UpdateItem: 'updateItem',
  UpdateTable: 'updateTable',
} as const;

export type DynaliteOperation = keyof typeof actionNames;

export function isDynaliteOperation(name: string): name is DynaliteOperation {
  return Object.hasOwn(actionNames, name);
}

const actions = new Map<DynaliteOperation, Action>();
const actionValidations = new Map<DynaliteOperation, Validation>();
/** Each operation's members with only the checks dynalite makes at the top level (required, table name). */
const topLevelValidations = new Map<DynaliteOperation, Validation['types']>();
for (const [operation, file] of Object.entries(actionNames) as [DynaliteOperation, string][]) {
  actions.set(operation, require(`dynalite/actions/${file}.js`));
  const validation: Validation = require(`dynalite/validations/${file}.js`);
  actionValidations.set(operation, validation);
  topLevelValidations.set(
    operation,
    Object.fromEntries(
      Object.entries(validation.types).map(([name, spec]) => {
        const { required, tableName } = spec as { required?: boolean; tableName?: boolean };
        return [name, { ...(required ? { required } : {}), ...(tableName ? { tableName } : {}) }];
      }),
    ),
  );
}

export function createStore(options: { path?: string; createTableMs: number }): Store {
  return dynaliteDb.create({ ...options, deleteTableMs: options.createTableMs, updateTableMs: options.createTableMs });
}

/** Prefixes under which dynalite 4.0.0 keeps a table's items and index entries in its one LevelDB. */
export const levelKeys = {
  table: (name: string) => `table~${name}`,
  item: (table: string, key: string) => `item-${table}~${key}`,
  index: (type: string, table: string, index: string, key: string) => `index-${type.toLowerCase()}~${table}~${index}~${key}`,
};

/** Turns dynalite's error objects (and our own) into an EngineError; anything else is rethrown as is. */
export function toEngineError(err: unknown): EngineError | unknown {
  if (err instanceof EngineError) return err;
  const e = err as DynaliteError;
  if (e && typeof e === 'object' && e.statusCode && e.body) {
    return EngineError.fromBody(e.statusCode, e.body);
  }
  return err;
}

/**
 * Type-checks and validates a request with dynalite's own rules for `operation`, which
 * also parses its expressions. Returns the cleaned request (unknown members dropped).
 * @throws EngineError (SerializationException or ValidationException) for bad input
 */
export function validate(operation: DynaliteOperation, body: Record<string, unknown>, store: Store) {
  const validation = actionValidations.get(operation);
  if (!validation) throw new Error(`no validation for ${operation}`);
  return validateWith(validation, body, store);
}

/**
 * `validate` for a request already checked by a spec that gives its members the types and
 * validations `operation` gives them (a transaction's member, checked with the transaction):
 * what that spec could not check (required members and table names, which dynalite checks at the
 * top level only, and the operation's own step, which parses expressions) without walking every
 * member's validations a second time.
 * @throws EngineError (ValidationException) for bad input
 */
export function validateTyped(operation: DynaliteOperation, data: Record<string, unknown>, store: Store) {
  const validation = actionValidations.get(operation);
  const topLevel = topLevelValidations.get(operation);
  if (!validation || !topLevel) throw new Error(`no validation for ${operation}`);
  try {
    const copy = { ...data };
    validations.checkValidations(copy, topLevel, validation.custom, store);
    return copy;
  } catch (err) {
    throw toEngineError(err);
  }
}

/** Validates `body` against a spec in dynalite's format, so our own operations word errors the same way. */
export function validateWith(validation: Validation, body: Record<string, unknown>, store: Store | undefined) {
  try {
    const data = validations.checkTypes({ ...body }, validation.types);
    validations.checkValidations(data, validation.types, validation.custom, store);
    return data;
  } catch (err) {
    throw toEngineError(err);
  }
}

/**
 * Runs a dynalite action. Some expressions that parse (begins_with on two maps, BETWEEN on
 * attribute operands) make dynalite throw from inside a LevelDB callback or stream event,
 * where no caller could catch it and the process would end. The action gets a store whose
 * callbacks and stream events are guarded: such a throw fails this request only.
 * `onThrow` lets the caller release what the action held (its item lock).
 */
export function runAction(operation: DynaliteOperation, store: Store, data: Record<string, unknown>, onThrow?: () => void) {
  const action = actions.get(operation);
  if (!action) throw new Error(`no action for ${operation}`);
  return new Promise<Record<string, unknown>>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      onThrow?.();
      reject(unevaluable(err));
    };
    const done: Callback<Record<string, unknown>> = (err, result) => {
      if (settled) return;
      settled = true;
      if (err) reject(toEngineError(err));
      else resolve(result ?? {});
    };
    try {
      action(guarded(store, fail), data, done);
    } catch (err) {
      fail(err);
    }
  });
}

/** What a request gets when dynalite throws while evaluating one of its expressions on an item. */
export function unevaluable(err: unknown) {
  return errors.validation(`An expression of this request could not be evaluated on an item: ${(err as Error)?.message ?? err}`);
}

/** A store whose sub-databases run the action's callbacks, and its streams' listeners, inside try/catch. */
function guarded(store: Store, fail: (err: unknown) => void): Store {
  const guard =
    <A extends unknown[]>(cb: (...args: A) => void) =>
    (...args: A) => {
      try {
        cb(...args);
      } catch (err) {
        fail(err);
      }
    };
  const wrapDb = (db: SubDb): SubDb => ({
    lock: db.lock,
    get: (key, cb) => db.get(key, guard(cb)),
    put: (key, value, cb) => db.put(key, value, guard(cb)),
    del: (key, cb) => db.del(key, guard(cb)),
    createValueStream(options) {
      const stream = db.createValueStream(options);
      const emit = stream.emit.bind(stream);
      stream.emit = (event: string | symbol, ...args: unknown[]) => {
        try {
          return emit(event, ...args);
        } catch (err) {
          fail(err);
          return false;
        }
      };
      return stream;
    },
  });
  return Object.create(store, {
    getItemDb: { value: (table: string) => wrapDb(store.getItemDb(table)) },
    getIndexDb: { value: (type: string, table: string, index: string) => wrapDb(store.getIndexDb(type, table, index)) },
    getTable: {
      value: (name: string, checkStatus: unknown, cb?: Callback<TableDescription>) => {
        if (typeof checkStatus === 'function') return store.getTable(name, guard(checkStatus as Callback<TableDescription>));
        return store.getTable(name, checkStatus as boolean, guard(cb as Callback<TableDescription>));
      },
    },
  });
}

export function getTable(store: Store, name: string, checkStatus = true) {
  return new Promise<TableDescription>((resolve, reject) => {
    store.getTable(name, checkStatus, (err, table) => (err ? reject(toEngineError(err)) : resolve(table as TableDescription)));
  });
}

/** The key attributes of `item` (for stream records and TTL deletes). */
export function keyOf(item: Item, table: TableDescription): Item {
  const key: Item = {};
  for (const { AttributeName } of table.KeySchema) {
    const value = item[AttributeName];
    if (value) key[AttributeName] = value;
  }
  return key;
}

/** dynalite's type spec for an operation's request members (to nest inside our own specs). */
export function requestTypes(operation: DynaliteOperation) {
  const validation = actionValidations.get(operation);
  if (!validation) throw new Error(`no validation for ${operation}`);
  return validation.types;
}
