/**
 * What each API key has open (WebSockets, SSE streams), so that revoking the key ends them:
 * a revoked key receives nothing more, on any transport.
 */
export function createSessions() {
  const byKey = new Map<string, Set<() => void>>();
  return {
    /** Registers how to end something opened with `keyId`. @returns the function that forgets it */
    track(keyId: string, end: () => void) {
      let set = byKey.get(keyId);
      if (!set) {
        set = new Set();
        byKey.set(keyId, set);
      }
      set.add(end);
      const own = set;
      return () => {
        own.delete(end);
        if (own.size === 0 && byKey.get(keyId) === own) byKey.delete(keyId);
      };
    },
    /** Ends everything opened with these keys. */
    revoke(keyIds: Iterable<string>) {
      for (const keyId of keyIds) {
        const set = byKey.get(keyId);
        byKey.delete(keyId);
        for (const end of set ?? []) end();
      }
    },
  };
}

export type Sessions = ReturnType<typeof createSessions>;
