/**
 * Which ClientRequestTokens may have been used within their window, so that a new token (nearly
 * every transaction's) is taken without first reading LevelDB for it: that read was a third of
 * the trips to LevelDB's threads a small transaction made. A Bloom filter per minute of use:
 * it never says "not used" of a token that was (a "maybe" is read as before), has a fixed size,
 * and is dropped once every token in it is past its window.
 */

/** Bits of one minute's filter: 256 KiB, for about one "maybe" in 10,000 new tokens at 1,000 transactions a second. */
export const FILTER_BITS = 1 << 21;
/** Bits set per token. */
const HASHES = 6;
const MINUTE_MS = 60_000;

/** Two independent 32-bit hashes of the token (FNV-1a with two offsets), for double hashing. */
function hashes(token: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ token.length;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  // Odd, so the probes of one token never fall on one bit.
  return [a >>> 0, (b | 1) >>> 0];
}

export function createRecentTokens(windowMs: number) {
  /** Filters by the minute their tokens were used in. */
  const minutes = new Map<number, Uint32Array>();
  /** Until the tokens already stored are loaded, every token may have been used. */
  let ready = false;

  const probes = (token: string, visit: (word: number, bit: number) => boolean | undefined) => {
    const [a, b] = hashes(token);
    for (let i = 0; i < HASHES; i++) {
      const at = (a + Math.imul(i, b)) >>> 0;
      const index = at & (FILTER_BITS - 1);
      if (visit(index >>> 5, 1 << (index & 31)) === false) return false;
    }
    return true;
  };

  /** Drops the minutes whose every token is past its window at `now`. */
  function forget(now: number) {
    for (const minute of minutes.keys()) if ((minute + 1) * MINUTE_MS <= now - windowMs) minutes.delete(minute);
  }

  return {
    /** Notes a token used at `at` (before its transaction commits, so no later lookup misses it). */
    add(token: string, at: number) {
      const minute = Math.floor(at / MINUTE_MS);
      let bits = minutes.get(minute);
      if (!bits) {
        forget(at);
        bits = new Uint32Array(FILTER_BITS / 32);
        minutes.set(minute, bits);
      }
      const filter = bits;
      probes(token, (word, bit) => {
        filter[word] = (filter[word] as number) | bit;
        return undefined;
      });
    },
    /** False only for a token not used within its window: true may be wrong (then the token is read). */
    mayHave(token: string) {
      if (!ready) return true;
      for (const bits of minutes.values()) if (probes(token, (word, bit) => ((bits[word] as number) & bit) !== 0)) return true;
      return false;
    },
    /** Called once the tokens already stored have been added. */
    loaded() {
      ready = true;
    },
    /** Whether lookups may skip LevelDB yet, and the minutes kept. */
    stats: () => ({ ready, minutes: minutes.size }),
  };
}
