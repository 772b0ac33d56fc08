/**
 * ClientRequestTokens of an engine whose data is in memory: kept in a map, in the order they
 * were used, rather than as LevelDB entries. Nothing of an in-memory store outlives the process,
 * so its tokens need not be written with the data; as entries they cost every transaction two
 * more to write (and later two to delete), about a third of what a token-bearing transaction
 * adds to a PutItem (tokens.ts keeps them on disk, where a restart must find them).
 *
 * A token is noted once its transaction has committed, before it leaves the tokens in flight,
 * so no request with it ever finds neither. The map holds the tokens of the last 10 minutes (a
 * prune every minute drops the others, oldest first) and takes less memory than the entries did.
 */
import { errors } from '../errors.ts';
import { type Claim, createInFlight, MAX_PENDING_TOKENS, TOKEN_TTL_MS, type Tokens } from './tokens.ts';

export function createMemoryTokens(now: () => number, maxPending = MAX_PENDING_TOKENS): Tokens {
  const pending = createInFlight(maxPending);
  /** Tokens of committed transactions, oldest first (one used again after its window moves to the end). */
  const used = new Map<string, { hash: string; at: number }>();
  let pruned = 0;
  /** The latest `at` noted, and whether a token was noted before it (the clock set back): the map is then out of time order. */
  let latest = Number.NEGATIVE_INFINITY;
  let disordered = false;

  async function claim(token: string, hash: string): Promise<Claim> {
    pending.refuseRunning(token, hash);
    const stored = used.get(token);
    // A token past its window is forgotten, as if it had been pruned already.
    if (stored && now() - stored.at < TOKEN_TTL_MS) {
      if (stored.hash !== hash) throw errors.idempotentParameterMismatch();
      return { result: {} };
    }
    const release = pending.take(token, hash);
    return {
      ops: [],
      landed() {
        if (used.delete(token)) pruned++;
        const at = now();
        if (at < latest) disordered = true;
        latest = Math.max(latest, at);
        used.set(token, { hash, at });
      },
      release,
    };
  }

  /**
   * Drops the tokens past their window, oldest first, up to the first one within it; after the
   * clock was set back, all of them are looked at, until those left are in time order again.
   * Returns how many.
   */
  async function prune() {
    const cutoff = now() - TOKEN_TTL_MS;
    let count = 0;
    let last = Number.NEGATIVE_INFINITY;
    let ordered = true;
    for (const [token, { at }] of used) {
      if (at <= cutoff) {
        used.delete(token);
        count++;
        continue;
      }
      if (!disordered) break;
      if (at < last) ordered = false;
      last = at;
    }
    if (ordered) disordered = false;
    pruned += count;
    return count;
  }

  return {
    claim,
    prune,
    close: async () => undefined,
    // Nothing is read from LevelDB: every lookup is in the map.
    stats: () => ({ inFlight: pending.size, pruned, lookups: 0, kept: used.size, recent: { ready: true, minutes: 0 } }),
  };
}
