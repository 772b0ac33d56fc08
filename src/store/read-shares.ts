/**
 * Table reads in flight, shared fairly between tenants (lib/fair-shares.ts): at most `total` at
 * once for the whole process (RUNPLANE_READS_IN_FLIGHT) and `perTenant` for one tenant
 * (RUNPLANE_TENANT_READS_IN_FLIGHT). A request's reads and a feed's take places here alike.
 */
import { ReadsWaiting } from '../domain/errors.ts';
import { FairShares, type Release } from '../lib/fair-shares.ts';

export interface ReadSharesOptions {
  /** Reads in flight at most, all tenants together. */
  total: number;
  /** Reads in flight at most for one tenant. */
  perTenant: number;
  /** Reads one tenant may have waiting; past it its next read is refused (retryably). */
  maxWaitingPerTenant?: number;
}

/**
 * Reads one tenant may have waiting for a place (each a closure and a promise, ~200 bytes).
 * Past it, the tenant's next read is refused with ReadsWaiting: the tenant is told to come back,
 * the process holds no more of its reads.
 */
const MAX_WAITING_PER_TENANT = 4096;

export class ReadShares {
  private readonly shares: FairShares;

  constructor(options: ReadSharesOptions) {
    const maxWaiting = options.maxWaitingPerTenant ?? MAX_WAITING_PER_TENANT;
    this.shares = new FairShares({ ...options, maxWaitingPerTenant: maxWaiting, refuse: () => new ReadsWaiting(maxWaiting) });
  }

  /** A place for one read of `tenant`'s. @throws ReadsWaiting when the tenant has too many waiting already */
  acquire(tenant: string): Release | Promise<Release> {
    return this.shares.acquire(tenant);
  }

  /** Reads in flight now, all tenants together or one tenant's (tests, /metrics). */
  inFlightOf(tenant?: string) {
    return this.shares.takenBy(tenant);
  }

  /** Reads refused because their tenant had too many waiting (/metrics). */
  get refused() {
    return this.shares.refused;
  }
}
