/**
 * An index of items by expiry time, one LevelDB key per item with an expiry, kept in the
 * same batch as every change to the item (while TTL is on for its table). The sweeper reads
 * only the part of it that is due, so its cost follows what expires, not the table's size.
 */
import type { Item, LevelOp } from '../dynalite.ts';

/** Expiry in milliseconds, padded to this many digits: up to the year 318857. */
const EXPIRY_DIGITS = 16;
const MAX_EXPIRY_MS = 10 ** EXPIRY_DIGITS - 1;

export const indexPrefix = (table: string) => `rp-ttlx~${table}~`;
const pad = (ms: number) => String(ms).padStart(EXPIRY_DIGITS, '0');
export const indexKey = (table: string, expiresAt: number, itemKey: string) => `${indexPrefix(table)}${pad(expiresAt)}~${itemKey}`;
/** Just before every entry expiring at `ms` or later. */
export const indexBound = (table: string, ms: number) => `${indexPrefix(table)}${pad(Math.min(Math.max(ms, 0), MAX_EXPIRY_MS))}`;

export interface IndexEntry {
  /** The item's key attributes, for the delete. */
  key: Item;
  /** The expiry attribute as it was indexed, for the delete's condition. */
  expiry: { N: string };
  itemKey: string;
  expiresAt: number;
}

/** When the item expires (ms), if its TTL attribute is a number DynamoDB would act on. */
export function expiryOf(item: Item | undefined, attributeName: string) {
  const value = (item?.[attributeName] as { N?: string } | undefined)?.N;
  if (value === undefined) return undefined;
  const ms = Math.floor(Number(value) * 1000);
  // Not a time (negative, or beyond what the key holds): never expires.
  return Number.isFinite(ms) && ms >= 0 && ms <= MAX_EXPIRY_MS ? ms : undefined;
}

export interface IndexedChange {
  tableName: string;
  itemKey: string;
  keys: Item;
  oldItem?: Item;
  newItem?: Item;
}

/** The index entries a change removes and adds. */
export function indexOps({ tableName, itemKey, keys, oldItem, newItem }: IndexedChange, attributeName: string): LevelOp[] {
  const before = expiryOf(oldItem, attributeName);
  const after = expiryOf(newItem, attributeName);
  const ops: LevelOp[] = [];
  if (before !== undefined && before !== after) ops.push({ type: 'del', key: indexKey(tableName, before, itemKey) });
  if (after !== undefined && newItem) {
    const entry: IndexEntry = { key: keys, expiry: newItem[attributeName] as { N: string }, itemKey, expiresAt: after };
    ops.push({ type: 'put', key: indexKey(tableName, after, itemKey), value: entry });
  }
  return ops;
}
