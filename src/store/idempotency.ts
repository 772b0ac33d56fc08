/**
 * Idempotency as state. A request with an idempotency key claims the key with a
 * conditional put IN THE SAME TRANSACTION as its effect, so the key is taken exactly when
 * the effect happened: no record is ever left "in progress" without its effect, and no
 * effect happens twice. The record keeps a hash of the request (the same key with a
 * different request is refused) and the result (a retry gets the first result back).
 * Records expire by TTL; an expired record counts as absent even before DynamoDB deletes it.
 */
import { IdempotencyConflict } from '../domain/errors.ts';
import { type Backoff, delayFor, sleep } from '../lib/backoff.ts';
import type { StoreDeps } from './deps.ts';
import { createRecords, requestHash } from './idempotency-record.ts';
import type { TransactItem } from './write.ts';

export interface IdempotencyKey {
  tenant: string;
  key: string;
  /** Which mutation, and a canonical form of its input (without the key). */
  operation: string;
  request: unknown;
}

/** The claim lost a race: another request with this key took it first. */
export class ClaimTaken extends Error {}

interface Codec<T> {
  encode(value: T): unknown;
  decode(stored: unknown): T;
}

/** An effect whose result is known before it is written: the result is stored with the claim, in the same transaction. */
export interface KnownResult<T> extends Codec<T> {
  /**
   * Applies the effect in ONE transaction whose first item is `claim(result)`. Throws ClaimTaken
   * when the claim's condition failed, a domain refusal when the effect's did.
   */
  perform(claim: (result: T) => TransactItem): Promise<T>;
}

/** An effect whose result is read after the write (a transaction returns no row): the result is stored once read. */
export interface ReadAfter<T> extends Codec<T> {
  /** As KnownResult's, with a claim that holds no result; returns the result when the write happened to return it. */
  perform(claim: () => TransactItem): Promise<T | undefined>;
  readResult(): Promise<T>;
}

type OnceSteps<T> = KnownResult<T> | ReadAfter<T>;

/** How often a request whose twin holds the claim looks for the twin's result (20 ms apart, about half a second in all). */
const TWIN_LOOKS = 25;
const TWIN_WAIT: Backoff = { firstMs: 20, maxMs: 20 };

export function createIdempotency(deps: StoreDeps, ttlSeconds: number) {
  const { claimItem, lookup, storeResult } = createRecords(deps, ttlSeconds);

  /**
   * Runs a request at most once per key.
   * @throws IdempotencyConflict when the key was used for a different request
   */
  function once<T>(idem: IdempotencyKey, steps: ReadAfter<T>): Promise<T>;
  function once<T>(idem: IdempotencyKey, steps: KnownResult<T>): Promise<T>;
  async function once<T>(idem: IdempotencyKey, steps: OnceSteps<T>): Promise<T> {
    const hash = requestHash(idem.operation, idem.request);
    const encode = (value: T) => JSON.stringify(steps.encode(value));
    const keep = async (value: T) => steps.decode(JSON.parse(await storeResult(idem, hash, encode(value))));
    for (let look = 0; ; look++) {
      const record = await lookup(idem);
      if (record) {
        if (record.requestHash !== hash) throw new IdempotencyConflict(idem.key, record.operation);
        if (record.result !== undefined) return steps.decode(JSON.parse(record.result));
        if (!('readResult' in steps)) throw new Error(`idempotency record ${idem.key} of ${idem.operation} holds no result`);
        // Its twin applied the effect and is about to store the result: wait for it, then
        // (the twin may have died) read the result ourselves.
        if (look < TWIN_LOOKS) {
          await sleep(delayFor(TWIN_WAIT, look));
          continue;
        }
        return keep(await steps.readResult());
      }
      try {
        if (!('readResult' in steps)) return await steps.perform((result) => claimItem(idem, hash, encode(result)));
        const known = await steps.perform(() => claimItem(idem, hash, undefined));
        return known !== undefined ? known : await keep(await steps.readResult());
      } catch (err) {
        // A concurrent twin claimed the key first: take its result. A refusal may also be the
        // twin's doing (it moved the run before this request read it), and a failure may have
        // come after the write landed (its answer lost): if the key holds a record, it answers.
        if (!(err instanceof ClaimTaken) && !(await lookup(idem).catch(() => undefined))) throw err;
      }
    }
  }

  return { once };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
