/**
 * Idempotency as state. A request with an idempotency key claims the key with a
 * conditional put IN THE SAME TRANSACTION as its effect, so the key is taken exactly when
 * the effect happened: no record is ever left "in progress" without its effect, and no
 * effect happens twice. The record keeps a hash of the request (the same key with a
 * different request is refused) and the result (a retry gets the first result back).
 * Records expire by TTL; an expired record counts as absent even before DynamoDB deletes it.
 */
import { createHash } from 'node:crypto';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { IdempotencyConflict } from '../domain/errors.ts';
import { attr } from '../table/codec.ts';
import { conditions, isConditionalCheckFailed } from '../table/conditions.ts';
import { keys } from '../table/keys.ts';
import type { StoreDeps } from './deps.ts';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

export interface IdempotencyKey {
  tenant: string;
  key: string;
  /** Which mutation, and a canonical form of its input (without the key). */
  operation: string;
  request: unknown;
}

/** The claim lost a race: another request with this key took it first. */
export class ClaimTaken extends Error {}

export interface OnceSteps<T> {
  /**
   * Applies the effect in ONE transaction whose first item is `claim`. Returns the result
   * when it is known without a read; undefined otherwise. Throws ClaimTaken when the claim's
   * condition failed, a domain refusal when the effect's did.
   */
  perform(claim: (result?: T) => TransactItem): Promise<T | undefined>;
  /** The result read afterwards, when perform could not know it. */
  readResult(): Promise<T>;
  encode(value: T): unknown;
  decode(stored: unknown): T;
}

/** How often a request whose twin holds the claim looks for the twin's result, and for how long. */
const WAIT_STEP_MS = 20;
const WAIT_STEPS = 25;

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

export function createIdempotency({ doc, tableName, now }: StoreDeps, ttlSeconds: number) {
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
          [attr.expiresAt]: Math.floor(at.getTime() / 1000) + ttlSeconds,
        },
        // The key is free, or its record expired (DynamoDB deletes expired rows late).
        ConditionExpression: `${conditions.absent} OR #expiresAt <= :nowSeconds`,
        ExpressionAttributeNames: { '#expiresAt': attr.expiresAt },
        ExpressionAttributeValues: { ':nowSeconds': nowSeconds() },
      },
    };
  }

  /** The live record of a key, strongly consistent (it decides whether to act). */
  async function lookup(idem: IdempotencyKey) {
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName, Key: keys.idempotency(idem.tenant, idem.key), ConsistentRead: true }),
    );
    if (!Item || Number(Item[attr.expiresAt] ?? 0) <= nowSeconds()) return undefined;
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

  /**
   * Runs a request at most once per key.
   * @throws IdempotencyConflict when the key was used for a different request
   */
  async function once<T>(idem: IdempotencyKey, steps: OnceSteps<T>): Promise<T> {
    const hash = requestHash(idem.operation, idem.request);
    const decode = (stored: string) => steps.decode(JSON.parse(stored));
    for (let look = 0; ; look++) {
      const record = await lookup(idem);
      if (record) {
        if (record.requestHash !== hash) throw new IdempotencyConflict(idem.key, record.operation);
        if (record.result !== undefined) return decode(record.result);
        // Its twin applied the effect and is about to store the result: wait for it, then
        // (the twin may have died) read the result ourselves.
        if (look < WAIT_STEPS) {
          await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
          continue;
        }
        return decode(await storeResult(idem, hash, JSON.stringify(steps.encode(await steps.readResult()))));
      }
      try {
        const known = await steps.perform((result) =>
          claimItem(idem, hash, result === undefined ? undefined : JSON.stringify(steps.encode(result))),
        );
        if (known !== undefined) return known;
        return decode(await storeResult(idem, hash, JSON.stringify(steps.encode(await steps.readResult()))));
      } catch (err) {
        if (!(err instanceof ClaimTaken)) throw err;
        // A concurrent twin claimed the key first: take its result.
      }
    }
  }

  return { once, lookup };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
