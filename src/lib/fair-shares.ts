/**
 * A pool shared fairly between tenants: at most `total` units taken at once for the whole
 * process and `perTenant` for one tenant. What does not fit waits in its tenant's own queue, and
 * room that frees up goes to the waiting tenants in turn, so one tenant's thousands of waiting
 * takers cannot stand in front of another tenant's one: the other waits for room, not for the
 * queue. One taker always gets in when its tenant holds nothing and the pool is empty, however
 * large it is (a request as costly as the limit still runs).
 */

/** Gives what was taken back (once, however often called). */
export type Release = () => void;

export interface FairSharesOptions {
  /** Units taken at most, all tenants together. */
  total: number;
  /** Units taken at most by one tenant. */
  perTenant: number;
  /** Takers one tenant may have waiting; past it its next one is refused with `refuse()`. */
  maxWaitingPerTenant: number;
  /** The error a taker past its tenant's queue is refused with. */
  refuse: () => Error;
}

interface Waiting {
  units: number;
  grant: () => void;
}

interface TenantShare {
  taken: number;
  waiting: Waiting[];
}

export class FairShares {
  private taken = 0;
  private readonly tenants = new Map<string, TenantShare>();
  /** Tenants with takers waiting, in the order they are served (each once). */
  private readonly turns = new Set<string>();
  /** For /metrics: takers refused because their tenant had too many waiting. */
  refused = 0;

  constructor(private readonly options: FairSharesOptions) {}

  /** `units` for one of `tenant`'s takers: at once when they fit, else once they do. @throws refuse() when the tenant has too many waiting */
  acquire(tenant: string, units = 1): Release | Promise<Release> {
    let share = this.tenants.get(tenant);
    if (!share) {
      share = { taken: 0, waiting: [] };
      this.tenants.set(tenant, share);
    }
    if (share.waiting.length === 0 && this.fits(share, units)) return this.grant(tenant, share, units);
    if (share.waiting.length >= this.options.maxWaitingPerTenant) {
      this.refused++;
      throw this.options.refuse();
    }
    const mine = share;
    return new Promise<Release>((resolve) => {
      mine.waiting.push({ units, grant: () => resolve(this.grant(tenant, mine, units)) });
      this.turns.add(tenant);
    });
  }

  /** Units taken now, all tenants together or one tenant's (tests, /metrics). */
  takenBy(tenant?: string) {
    return tenant === undefined ? this.taken : (this.tenants.get(tenant)?.taken ?? 0);
  }

  private fits(share: TenantShare, units: number) {
    const { total, perTenant } = this.options;
    const tenantRoom = share.taken === 0 || share.taken + units <= perTenant;
    const poolRoom = this.taken === 0 || this.taken + units <= total;
    return tenantRoom && poolRoom;
  }

  private grant(tenant: string, share: TenantShare, units: number): Release {
    this.taken += units;
    share.taken += units;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.taken -= units;
      share.taken -= units;
      this.serveWaiting();
      if (share.taken === 0 && share.waiting.length === 0 && this.tenants.get(tenant) === share) this.tenants.delete(tenant);
    };
  }

  /** Hands free room to the waiting tenants in turn, one taker a turn (a tenant whose next one does not fit is passed over). */
  private serveWaiting() {
    let granted = true;
    while (granted) {
      granted = false;
      for (const tenant of [...this.turns]) {
        const share = this.tenants.get(tenant);
        const next = share?.waiting[0];
        if (!share || !next) {
          this.turns.delete(tenant);
          continue;
        }
        if (!this.fits(share, next.units)) continue;
        share.waiting.shift();
        next.grant();
        granted = true;
        // Back at the end of the line while it has takers waiting.
        this.turns.delete(tenant);
        if (share.waiting.length > 0) this.turns.add(tenant);
      }
    }
  }
}
