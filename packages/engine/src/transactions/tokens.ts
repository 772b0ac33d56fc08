/**
 * ClientRequestTokens of TransactWriteItems. A token is written in the same LevelDB batch as
 * the transaction it made idempotent, so it exists exactly when the transaction was applied,
 * also across a crash and a restart. An index by time lets expired tokens be deleted in
 * order, each once: the bookkeeping is O(1) per transaction. Memory holds only the tokens
 * of transactions in flight.
 */
import type { LevelOp, MainDb } from '../dynalite.ts';
import { EngineError, errors } from '../errors.ts';
import { createRecentTokens } from './recent-tokens.ts';

/** DynamoDB remembers a ClientRequestToken for 10 minutes. */
export const TOKEN_TTL_MS = 10 * 60_000;
/** Transactions with a token in flight at once; one more is answered ThrottlingException (the SDK retries it). */
export const MAX_PENDING_TOKENS = 10_000;
/** Expired tokens deleted per LevelDB batch when pruning; a prune goes on batch after batch. */
const PRUNE_BATCH = 500;
/** Tokens read per page when the stored ones are noted at start. */
const LOAD_PAGE = 1_000;

const tokenKey = (token: string) => `rp-txtok~${token}`;
const expiryPrefix = 'rp-txexp~';
const expiryKey = (at: number, token: string) => `${expiryPrefix}${String(at).padStart(16, '0')}~${token}`;

interface StoredToken {
  hash: string;
  at: number;
  result: Record<string, unknown>;
}

/**
 * What a request with a token is to do: answer the earlier result, or run and commit `ops` with
 * its writes, calling `landed` once they are committed and `release` however it ended.
 */
export type Claim = { result: Record<string, unknown> } | { ops: LevelOp[]; landed(): void; release(): void };

export interface TokenStats {
  /** Of transactions in flight now. */
  inFlight: number;
  /** Deleted after their window so far. */
  pruned: number;
  /** Read from LevelDB so far: a new token is not, once the filters of recent ones are ready. */
  lookups: number;
  /** Kept now, where that is known without a read (in memory). */
  kept?: number;
  recent: { ready: boolean; minutes: number };
}

/** Where the tokens of an engine's transactions are kept. */
export interface Tokens {
  /**
   * @throws IdempotentParameterMismatchException for the same token with another request
   * @throws TransactionInProgressException while the same request is still running
   */
  claim(token: string, hash: string): Promise<Claim>;
  /** Deletes the tokens whose window has passed; resolves to how many. */
  prune(): Promise<number>;
  close(): Promise<void>;
  stats(): TokenStats;
}

/** Tokens of transactions in flight, with the hash of their request: at most `maxPending`. */
export function createInFlight(maxPending: number) {
  const pending = new Map<string, string>();
  return {
    /**
     * Refuses a token in flight: as in progress for the same request, as a mismatch for another.
     * @throws TransactionInProgressException or IdempotentParameterMismatchException
     */
    refuseRunning(token: string, hash: string) {
      const running = pending.get(token);
      if (running !== undefined) throw running === hash ? errors.transactionInProgress() : errors.idempotentParameterMismatch();
    },
    /**
     * Notes the token in flight; returns its release (once only: after it, the token may be another request's).
     * @throws ThrottlingException past the bound (the SDK retries it)
     */
    take(token: string, hash: string) {
      if (pending.size >= maxPending) {
        throw new EngineError(
          400,
          'com.amazon.coral.availability#ThrottlingException',
          `Too many transactions with a ClientRequestToken in flight (${maxPending}); retry`,
        );
      }
      pending.set(token, hash);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        pending.delete(token);
      };
    },
    has: (token: string) => pending.has(token),
    get size() {
      return pending.size;
    },
  };
}

export function createTokens(db: MainDb, now: () => number, maxPending = MAX_PENDING_TOKENS): Tokens {
  const pending = createInFlight(maxPending);
  /** Tokens a prune is deleting, with the moment its batch lands: a claim of one waits for it. */
  const pruning = new Map<string, Promise<void>>();
  let pruned = 0;
  /** Tokens used within their window, so that a new one needs no read (a "maybe" is read). */
  const recent = createRecentTokens(TOKEN_TTL_MS);
  let stopping = false;
  let lookups = 0;

  /** Notes the tokens stored within their window (from before a restart); until then every token is read. */
  async function load() {
    let after = expiryKey(now() - TOKEN_TTL_MS, '');
    for (;;) {
      if (stopping) return;
      const page: { token: string; at: number }[] = [];
      for await (const value of db.values({ gt: after, lt: `${expiryPrefix}~`, limit: LOAD_PAGE }))
        page.push(value as { token: string; at: number });
      for (const { token, at } of page) recent.add(token, at);
      const last = page.at(-1);
      if (!last) break;
      after = expiryKey(last.at, last.token);
    }
    recent.loaded();
  }
  // A load that fails leaves every token read, as before it ended.
  const loading = load().catch(() => undefined);

  /**
   * @throws IdempotentParameterMismatchException for the same token with another request
   * @throws TransactionInProgressException while the same request is still running
   */
  async function claim(token: string, hash: string): Promise<Claim> {
    // A token being pruned is used again only once the prune's deletes have landed.
    for (let busy = pruning.get(token); busy; busy = pruning.get(token)) await busy;
    pending.refuseRunning(token, hash);
    const release = pending.take(token, hash);
    let stored: StoredToken | undefined;
    if (recent.mayHave(token)) {
      lookups++;
      try {
        stored = (await db.get(tokenKey(token))) as StoredToken | undefined;
      } catch (err) {
        release();
        throw err;
      }
    }
    // A token past its window is forgotten, as if it had been pruned already.
    if (stored && now() - stored.at < TOKEN_TTL_MS) {
      release();
      if (stored.hash !== hash) throw errors.idempotentParameterMismatch();
      return { result: stored.result };
    }
    const at = now();
    // Noted before its transaction commits: a lookup after it can never skip the read.
    recent.add(token, at);
    const value: StoredToken = { hash, at, result: {} };
    return {
      ops: [
        { type: 'put', key: tokenKey(token), value },
        { type: 'put', key: expiryKey(at, token), value: { token, at } },
      ],
      // Written with the transaction's batch.
      landed() {},
      release,
    };
  }

  /**
   * Deletes the tokens whose window has passed, oldest first, in bounded batches. Returns how many.
   * A token in flight is left for a later prune (its transaction may be about to write it again).
   */
  async function prune() {
    const cutoff = now() - TOKEN_TTL_MS;
    let count = 0;
    let after = expiryPrefix;
    for (;;) {
      const expired: { key: string; token: string; at: number }[] = [];
      for await (const value of db.values({ gt: after, lt: expiryKey(cutoff, ''), limit: PRUNE_BATCH })) {
        const { token, at } = value as { token: string; at: number };
        expired.push({ key: expiryKey(at, token), token, at });
      }
      if (expired.length === 0) break;
      after = (expired.at(-1) as (typeof expired)[number]).key;
      let landed!: () => void;
      const landing = new Promise<void>((resolve) => {
        landed = resolve;
      });
      const mine: string[] = [];
      try {
        const ops: LevelOp[] = [];
        for (const { key, token, at } of expired) {
          if (pending.has(token) || pruning.has(token)) continue;
          pruning.set(token, landing);
          mine.push(token);
          ops.push({ type: 'del', key });
          // The token may have been used again since (after its window): keep that newer use.
          const stored = (await db.get(tokenKey(token))) as StoredToken | undefined;
          if (stored?.at === at) ops.push({ type: 'del', key: tokenKey(token) });
        }
        if (ops.length > 0) await db.batch(ops);
      } finally {
        for (const token of mine) pruning.delete(token);
        landed();
      }
      count += mine.length;
    }
    pruned += count;
    return count;
  }

  return {
    claim,
    prune,
    /** Waits for the start's load to end (it stops at its next page). */
    async close() {
      stopping = true;
      await loading;
    },
    /** Tokens read from LevelDB so far (a new one usually is not), and the recent tokens' filters. */
    stats: () => ({ inFlight: pending.size, pruned, lookups, recent: recent.stats() }),
  };
}
