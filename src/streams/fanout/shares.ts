/**
 * Each tenant's share of the bytes this replica sends through Redis: a token bucket per
 * tenant, refilled at `bytesPerSecond` up to `burstBytes`. A change its tenant's bucket cannot
 * pay for goes as a notice instead (fanout/notices.ts: the other replicas read it from the
 * table), and takes nothing from the bucket; so a tenant past its share slows only its own
 * delivery across replicas, and the others' changes go as before. Each replica keeps its own
 * buckets: with N replicas a tenant may send N shares in all.
 */

import type { Change } from '../changes.ts';
import { ENTRY_FIELDS_BYTES } from './bounds.ts';
import { encodeChange } from './codec.ts';

/** Buckets kept at most; past it the one kept longest is forgotten (its tenant comes back with a full burst: one burst more, at most, per tenant forgotten). */
export const MAX_TENANT_BUCKETS = 10_000;
/** Seconds of its rate a tenant may send at once (its burst), and never less than one entry. */
export const BURST_SECONDS = 2;

interface Bucket {
  tokens: number;
  at: number;
}

export class TenantShares {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  constructor(
    bytesPerSecond: number,
    private readonly burstBytes: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.perMs = bytesPerSecond / 1000;
  }

  /** Takes `bytes` from the tenant's bucket if it holds them (true), or takes nothing (false: past its share). */
  take(tenant: string, bytes: number): boolean {
    const now = this.now();
    let bucket = this.buckets.get(tenant);
    if (bucket) {
      bucket.tokens = Math.min(this.burstBytes, bucket.tokens + (now - bucket.at) * this.perMs);
      bucket.at = now;
    } else {
      // Not moved when used (that costs each change): the map's order is the order tenants came in.
      if (this.buckets.size >= MAX_TENANT_BUCKETS) this.buckets.delete(this.buckets.keys().next().value as string);
      bucket = { tokens: this.burstBytes, at: now };
      this.buckets.set(tenant, bucket);
    }
    if (bucket.tokens < bytes) return false;
    bucket.tokens -= bytes;
    return true;
  }

  get tenants() {
    return this.buckets.size;
  }
}

/** Whether each change goes whole, or as a notice: larger than an entry may be, or past its tenant's share. */
export class EntryShares {
  /** Changes sent as notices, by tenant and why. */
  readonly notices = new NoticeCounts();
  private readonly buckets: TenantShares;

  constructor(
    private readonly entryBytes: number,
    bytesPerSecond: number,
    now?: () => number,
  ) {
    // A share of 0: every change goes as a notice (Redis carries what changed, the table the content).
    const burst = bytesPerSecond === 0 ? 0 : Math.max(bytesPerSecond * BURST_SECONDS, entryBytes + ENTRY_FIELDS_BYTES);
    this.buckets = new TenantShares(bytesPerSecond, burst, now);
  }

  /** The change as an entry's value, or undefined when it goes as a notice (counted). */
  valueOf(change: Change): string | undefined {
    // Longer than an entry in UTF-16 units is longer in UTF-8 bytes too: not even encoded.
    if (change.kind === 'output' && change.chunk.text.length > this.entryBytes) return this.noticed(change, 'size');
    const value = encodeChange(change);
    // Measured in bytes, as the receivers measure it (the Buffer Redis hands them).
    const bytes = Buffer.byteLength(value);
    if (bytes > this.entryBytes) return this.noticed(change, 'size');
    if (!this.buckets.take(change.tenant, bytes + ENTRY_FIELDS_BYTES)) return this.noticed(change, 'share');
    return value;
  }

  private noticed(change: Change, reason: NoticeReason): undefined {
    this.notices.count(change.tenant, reason);
    return undefined;
  }
}

/** Why a change went as a notice: larger than an entry may be, or its tenant past its share. */
export type NoticeReason = 'size' | 'share';

/** Tenants whose notices are counted by name at most (one label each on /metrics); past it the least recently counted one's counts join the unnamed total. */
export const MAX_TENANTS_COUNTED = 1_000;

/** Changes sent as notices, per tenant and reason (for /metrics). */
export class NoticeCounts {
  private readonly byTenant = new Map<string, Record<NoticeReason, number>>();
  /** Tenants no longer counted by name. */
  private readonly others: Record<NoticeReason, number> = { size: 0, share: 0 };

  count(tenant: string, reason: NoticeReason) {
    let counts = this.byTenant.get(tenant);
    if (counts) this.byTenant.delete(tenant);
    else {
      counts = { size: 0, share: 0 };
      if (this.byTenant.size >= MAX_TENANTS_COUNTED) {
        const [oldest, theirs] = this.byTenant.entries().next().value as [string, Record<NoticeReason, number>];
        this.byTenant.delete(oldest);
        this.others.size += theirs.size;
        this.others.share += theirs.share;
      }
    }
    counts[reason]++;
    this.byTenant.set(tenant, counts);
  }

  /** Every count: by tenant, then (tenant undefined) those of tenants no longer named. */
  samples(): Array<[tenant: string | undefined, reason: NoticeReason, count: number]> {
    const samples: Array<[string | undefined, NoticeReason, number]> = [];
    for (const [tenant, counts] of this.byTenant) {
      for (const reason of ['size', 'share'] as const) if (counts[reason] > 0) samples.push([tenant, reason, counts[reason]]);
    }
    for (const reason of ['size', 'share'] as const) if (this.others[reason] > 0) samples.push([undefined, reason, this.others[reason]]);
    return samples;
  }
}
