/**
 * Per-tenant caps across replicas: each replica writes what every tenant holds open on it (a
 * hash in Redis with an expiry, renewed each second) and reads the others', so a tenant's
 * subscriptions and connections are counted on every replica together. What another replica
 * holds is known a second late at most: a burst spread over replicas within that second can
 * pass the cap by what it opens in it. Each count is sealed like the fan-out's entries (a
 * count without a valid seal is ignored); while Redis does not answer, each replica holds
 * tenants to its own counts alone, as without Redis.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';

export interface TenantUsage {
  subscriptions: number;
  connections: number;
}

export interface UsageOptions {
  redis: Redis;
  prefix: string;
  replicaId: string;
  secret: string;
  /** The other replicas alive now, by id (from their sealed heartbeats: nobody can add one to be read). */
  replicas: () => Promise<string[]>;
  intervalMs?: number;
  now?: () => number;
}

const INTERVAL_MS = 1_000;
/** Counts older than this many intervals are not counted (a replica that stopped writing them). */
const STALE_INTERVALS = 5;

export class SharedUsage {
  private elsewhere = new Map<string, TenantUsage>();
  private readAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly intervalMs: number;
  private readonly now: () => number;
  /** Rounds that failed (Redis did not answer). */
  failures = 0;

  constructor(private readonly options: UsageOptions) {
    this.intervalMs = options.intervalMs ?? INTERVAL_MS;
    this.now = options.now ?? Date.now;
  }

  /** What a tenant holds open on the other replicas (nothing when that is not known lately). */
  of(tenant: string): TenantUsage {
    if (this.now() - this.readAt > STALE_INTERVALS * this.intervalMs) return { subscriptions: 0, connections: 0 };
    return this.elsewhere.get(tenant) ?? { subscriptions: 0, connections: 0 };
  }

  /** Shares `local` (what each tenant holds open on this replica) each interval, and reads the others'. */
  start(local: () => Iterable<[string, TenantUsage]>) {
    const round = () => {
      this.running ??= this.round(local)
        .catch(() => {
          this.failures++;
        })
        .finally(() => {
          this.running = undefined;
        });
    };
    round();
    this.timer = setInterval(round, this.intervalMs);
    this.timer.unref();
  }

  async stop() {
    clearInterval(this.timer);
    await this.running;
    await this.options.redis.del(this.key(this.options.replicaId)).catch(() => {});
  }

  private key(replicaId: string) {
    return `${this.options.prefix}:usage:${replicaId}`;
  }

  /** Sealed for this table's replicas (the prefix), this replica and this tenant: a count cannot be moved to another. */
  private seal(replicaId: string, tenant: string, usage: TenantUsage, at: number) {
    return createHmac('sha256', this.options.secret)
      .update(`usage\n${this.options.prefix}\n${replicaId}\n${tenant}\n${usage.subscriptions}\n${usage.connections}\n${at}`)
      .digest('hex');
  }

  private async round(local: () => Iterable<[string, TenantUsage]>) {
    const { redis, replicaId } = this.options;
    const at = this.now();
    const fields: string[] = [];
    for (const [tenant, usage] of local()) {
      if (usage.subscriptions === 0 && usage.connections === 0) continue;
      fields.push(tenant, `${usage.subscriptions} ${usage.connections} ${at} ${this.seal(replicaId, tenant, usage, at)}`);
    }
    const key = this.key(replicaId);
    const write = redis.multi().del(key);
    if (fields.length > 0) write.hset(key, ...fields).pexpire(key, STALE_INTERVALS * this.intervalMs);
    await write.exec();

    const others = (await this.options.replicas()).filter((id) => id !== replicaId);
    const read = redis.pipeline();
    for (const id of others) read.hgetall(this.key(id));
    const answers = others.length > 0 ? ((await read.exec()) ?? []) : [];
    const summed = new Map<string, TenantUsage>();
    answers.forEach(([err, hash], index) => {
      if (err || !hash) return;
      const id = others[index] as string;
      for (const [tenant, text] of Object.entries(hash as Record<string, string>)) {
        const usage = this.open(id, tenant, text, at);
        if (!usage) continue;
        const sum = summed.get(tenant) ?? { subscriptions: 0, connections: 0 };
        sum.subscriptions += usage.subscriptions;
        sum.connections += usage.connections;
        summed.set(tenant, sum);
      }
    });
    this.elsewhere = summed;
    this.readAt = this.now();
  }

  /** A count as another replica sealed it, or undefined (unsealed, altered, stale, malformed). */
  private open(replicaId: string, tenant: string, text: string, now: number): TenantUsage | undefined {
    const match = /^(\d{1,9}) (\d{1,9}) (\d{1,16}) ([0-9a-f]{64})$/.exec(text);
    if (!match) return undefined;
    const usage = { subscriptions: Number(match[1]), connections: Number(match[2]) };
    const at = Number(match[3]);
    if (Math.abs(now - at) > STALE_INTERVALS * this.intervalMs) return undefined;
    const expected = Buffer.from(this.seal(replicaId, tenant, usage, at), 'hex');
    return timingSafeEqual(expected, Buffer.from(match[4] as string, 'hex')) ? usage : undefined;
  }
}
