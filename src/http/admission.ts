/**
 * What one client may hold open on this server: subscriptions per connection and per tenant,
 * connections (WebSockets and SSE streams) per tenant, and how fast it may set subscriptions up. Each
 * admission returns the function that gives its place back; a refusal is a GraphQLError
 * naming the limit and its variable, answered before any work is done for the request.
 */
import { GraphQLError } from 'graphql';
import { codes } from '../schema/error-codes.ts';
import type { ConnectionLimits } from './connections.ts';

export type Release = () => void;

/** A token bucket: `rate` a second, bursts up to `burst`. */
export class RateBucket {
  private tokens: number;
  private at = performance.now();

  constructor(
    private readonly rate: number,
    private readonly burst = rate * 2,
  ) {
    this.tokens = burst;
  }

  /** Takes one token; when there is none, how many ms until there is. */
  take(): { ok: true } | { ok: false; retryAfterMs: number } {
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil(((1 - this.tokens) / this.rate) * 1000) };
  }

  /** Whether it has refilled completely (it can be forgotten). */
  get idle() {
    return this.tokens + ((performance.now() - this.at) / 1000) * this.rate >= this.burst;
  }
}

/** Per-address buckets remembered (SSE clients); past this the idle ones are forgotten, then the oldest. */
const MAX_ADDRESS_BUCKETS = 10_000;

const limited = (message: string, variable: string, limit: number, status = 429) =>
  new GraphQLError(`${message} (limit ${limit}, ${variable})`, {
    extensions: { code: codes.limitExceeded, limit, variable, http: { status } },
  });

/** One connection's share: its subscriptions and its setup rate. */
export interface ConnectionSlot {
  subscriptions: number;
  readonly bucket: RateBucket;
}

/** What a tenant holds open elsewhere (on the other replicas): counted against its caps with this server's own. */
export type UsageElsewhere = (tenant: string) => { subscriptions: number; connections: number };

const nowhere: UsageElsewhere = () => ({ subscriptions: 0, connections: 0 });

export function createAdmission(limits: ConnectionLimits, elsewhere: UsageElsewhere = nowhere) {
  const subscriptions = new Map<string, number>();
  const connections = new Map<string, number>();
  const addressBuckets = new Map<string, RateBucket>();

  const count = (map: Map<string, number>, key: string, by: number) => {
    const n = (map.get(key) ?? 0) + by;
    if (n <= 0) map.delete(key);
    else map.set(key, n);
  };
  /** Gives back once, however often called. */
  const once = (release: Release): Release => {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      release();
    };
  };

  function bucketOf(address: string) {
    let bucket = addressBuckets.get(address);
    if (!bucket) {
      if (addressBuckets.size >= MAX_ADDRESS_BUCKETS) {
        for (const [key, old] of addressBuckets) if (old.idle) addressBuckets.delete(key);
        if (addressBuckets.size >= MAX_ADDRESS_BUCKETS) addressBuckets.delete(addressBuckets.keys().next().value as string);
      }
      bucket = new RateBucket(limits.subscribeRate);
      addressBuckets.set(address, bucket);
    }
    return bucket;
  }

  return {
    /** A slot for a new connection's subscriptions. */
    slot: (): ConnectionSlot => ({ subscriptions: 0, bucket: new RateBucket(limits.subscribeRate) }),

    /** A WebSocket or an SSE stream of `tenant` opens. */
    connect(tenant: string): Release | GraphQLError {
      if ((connections.get(tenant) ?? 0) + elsewhere(tenant).connections >= limits.maxConnectionsPerTenant) {
        return limited('Too many open connections for this tenant', 'RUNPLANE_MAX_CONNECTIONS_PER_TENANT', limits.maxConnectionsPerTenant);
      }
      count(connections, tenant, 1);
      return once(() => count(connections, tenant, -1));
    },

    /**
     * A subscription setup on a connection (a WebSocket's slot) or from an address (SSE, one
     * stream per request): refused past the setup rate. Checked before the operation is parsed.
     */
    setup(on: { slot: ConnectionSlot } | { address: string }): GraphQLError | undefined {
      const rate = ('slot' in on ? on.slot.bucket : bucketOf(on.address)).take();
      if (rate.ok) return undefined;
      return new GraphQLError(
        `Too many subscriptions set up too fast (at most ${limits.subscribeRate} a second, RUNPLANE_SUBSCRIBE_RATE): retry in ${rate.retryAfterMs} ms`,
        { extensions: { code: codes.rateLimited, retryAfterMs: rate.retryAfterMs, http: { status: 429 } } },
      );
    },

    /** A subscription of `tenant` starts, on a WebSocket's slot or over SSE. */
    subscribe(tenant: string, slot?: ConnectionSlot): Release | GraphQLError {
      if (slot && slot.subscriptions >= limits.maxSubscriptionsPerConnection) {
        return limited(
          'Too many subscriptions on this connection',
          'RUNPLANE_MAX_SUBSCRIPTIONS_PER_CONNECTION',
          limits.maxSubscriptionsPerConnection,
        );
      }
      if ((subscriptions.get(tenant) ?? 0) + elsewhere(tenant).subscriptions >= limits.maxSubscriptionsPerTenant) {
        return limited(
          'Too many open subscriptions for this tenant',
          'RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT',
          limits.maxSubscriptionsPerTenant,
        );
      }
      count(subscriptions, tenant, 1);
      if (slot) slot.subscriptions++;
      return once(() => {
        count(subscriptions, tenant, -1);
        if (slot) slot.subscriptions--;
      });
    },

    /** Open subscriptions and connections of a tenant on this server (for tests and metrics). */
    usage: (tenant: string) => ({ subscriptions: subscriptions.get(tenant) ?? 0, connections: connections.get(tenant) ?? 0 }),

    /** What every tenant holds open on this server (shared with the other replicas). */
    *usageByTenant(): Iterable<[string, { subscriptions: number; connections: number }]> {
      for (const tenant of new Set([...subscriptions.keys(), ...connections.keys()]))
        yield [tenant, { subscriptions: subscriptions.get(tenant) ?? 0, connections: connections.get(tenant) ?? 0 }];
    },
  };
}

export type Admission = ReturnType<typeof createAdmission>;
