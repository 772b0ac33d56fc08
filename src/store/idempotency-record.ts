/**
 * The idempotency record of a key: claimed by a conditional put inside the effect's own
 * transaction, read to decide whether to act, and given the result once it is known.
 */
import { createHash } from 'node:crypto';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { attr } from '../table/attributes.ts';
import { conditions, isConditionalCheckFailed } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';
import type { IdempotencyKey } from './idempotency.ts';
import type { TransactItem } from './write.ts';

/** Canonical JSON: object keys sorted, so equal requests hash equal. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

export function requestHash(operation: string, request: unknown) {
  return createHash('sha256')
    .update(`${operation}\n${canonical(request)}`)
    .digest('hex');
}

export function createRecords({ doc, tableName, now }: StoreDeps, ttlSeconds: number) {
  const nowSeconds = () => Math.floor(now().getTime() / 1000);

  function claimItem(idem: IdempotencyKey, hash: string, result: string | undefined): TransactItem {
    const at = now();
    return {
      Put: {
        TableName: tableName,
        Item: {
          ...keys.idempotency(idem.tenant, idem.key),
          [attr.entity]: 'idempotency',
          operation: idem.operation,
          requestHash: hash,
          ...(result !== undefined ? { result } : {}),
          [attr.createdAt]: at.toISOString(),
          [attr.ttl]: Math.floor(at.getTime() / 1000) + ttlSeconds,
        },
        // The key is free, or its record expired (DynamoDB deletes expired rows late).
        ConditionExpression: `${conditions.absent} OR #ttl <= :nowSeconds`,
        ExpressionAttributeNames: { '#ttl': attr.ttl },
        ExpressionAttributeValues: { ':nowSeconds': nowSeconds() },
      },
    };
  }

  /** The live record of a key, strongly consistent (it decides whether to act). */
  async function lookup(idem: IdempotencyKey) {
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName, Key: keys.idempotency(idem.tenant, idem.key), ConsistentRead: true }),
    );
    if (!Item || Number(Item[attr.ttl] ?? 0) <= nowSeconds()) return undefined;
    return Item as { requestHash: string; operation: string; result?: string };
  }

  /** Stores the result of an applied request once; whoever stores first wins, and all return that. */
  async function storeResult(idem: IdempotencyKey, hash: string, result: string) {
    try {
      await doc.send(
        new UpdateCommand({
          TableName: tableName,
          Key: keys.idempotency(idem.tenant, idem.key),
          UpdateExpression: 'SET #result = :result',
          // Still this request's claim, and no result yet.
          ConditionExpression: `${conditions.present} AND requestHash = :hash AND attribute_not_exists(#result)`,
          ExpressionAttributeNames: { '#result': 'result' },
          ExpressionAttributeValues: { ':result': result, ':hash': hash },
        }),
      );
      return result;
    } catch (err) {
      if (!isConditionalCheckFailed(err)) throw err;
      return (await lookup(idem))?.result ?? result;
    }
  }

  return { claimItem, lookup, storeResult };
}
