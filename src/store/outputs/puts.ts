/**
 * Output chunks being stored, shared fairly between tenants (lib/fair-shares.ts): at most
 * `total` puts in flight for the whole process and `perTenant` for one tenant; a flush past its
 * tenant's share waits its turn (its text waits in the tenant's backlog share meanwhile).
 *
 * Each put also waits a turn of the event loop first. The embedded engine answers without I/O,
 * so a flush's chunks, and the puts of every stream of a tenant flushing at once, would
 * otherwise all run within one turn, and a turn is what a new connection waits for to be
 * accepted (one a turn). A put waiting on a throttled partition keeps its place while it backs
 * off: one tenant's dozens of throttled streams try two at a time, not all at once. At a
 * graceful stop the bound is lifted: nobody waits to be served then, and the process may only
 * have its grace period to store what waits.
 */
import { FairShares, type Release } from '../../lib/fair-shares.ts';

/** Puts in flight at most, all tenants together. */
const PUTS_IN_FLIGHT = 16;
/** Puts in flight at most for one tenant. */
const TENANT_PUTS_IN_FLIGHT = 2;

export function outputPuts({ total = PUTS_IN_FLIGHT, perTenant = TENANT_PUTS_IN_FLIGHT } = {}) {
  const shares = new FairShares({
    total,
    perTenant,
    // The streams held bound who waits (each flushes one chunk at a time).
    maxWaitingPerTenant: Number.POSITIVE_INFINITY,
    refuse: () => new Error('unreachable: no bound on waiting puts'),
  });
  /** Set at a graceful stop: nobody is served any more, every stream stores what it can at once. */
  let unbounded = false;
  let unbind: () => void = () => undefined;
  const stopped = new Promise<undefined>((resolve) => {
    unbind = () => resolve(undefined);
  });
  /** A place for one of `tenant`'s puts (nothing to give back once unbounded). */
  async function place(tenant: string): Promise<Release> {
    if (unbounded) return () => undefined;
    const taken = shares.acquire(tenant);
    if (typeof taken === 'function') return taken;
    const got = await Promise.race([taken, stopped]);
    if (got) return got;
    // Unbounded while it waited: the place, when it comes, is given back at once.
    void taken.then((release) => release());
    return () => undefined;
  }
  return {
    /** Runs `put` (one chunk's write, its retries included) once `tenant` has a place, a turn later. */
    async put<T>(tenant: string, put: () => Promise<T>): Promise<T> {
      const release = await place(tenant);
      try {
        if (!unbounded) await new Promise<void>((resolve) => setImmediate(resolve));
        return await put();
      } finally {
        release();
      }
    },
    /** From now on every put goes at once (a graceful stop stores all it can before the process ends). */
    unbound() {
      unbounded = true;
      unbind();
    },
    /** Puts in flight now, all tenants together or one tenant's (tests). */
    inFlightOf: (tenant?: string) => shares.takenBy(tenant),
  };
}

export type OutputPuts = ReturnType<typeof outputPuts>;
