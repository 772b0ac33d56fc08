/**
 * Which stream shards this replica reads, when several replicas share one table: each shard
 * is held by one replica at a time through its lease row (store/leases/shards.ts), read from
 * the checkpoint kept there, and checkpointed with every renewal. A replica stops reading a
 * shard a quarter of the lease before it runs out unless renewed, so two never read one shard
 * at once; one that stalled past its lease finds its token refused and lets the shard go.
 */
import { heldByOther } from '../domain/lease.ts';
import { fairShare, mayTake, toHandBack } from '../domain/shard-share.ts';
import type { Logger } from '../lib/logger.ts';
import type { ShardLease, ShardLeases } from '../store/leases/shards.ts';
import type { ShardReader } from './shards.ts';

export interface OwnershipOptions {
  leases: ShardLeases;
  /** This replica's name in the lease rows. */
  replicaId: string;
  ttlSeconds: number;
  /** Live replicas, this one included (undefined while unknown: then every shard is in its share). */
  replicas: () => Promise<number | undefined>;
  log: Logger;
  now?: () => number;
}

interface Holding {
  lease: ShardLease;
  shard: ShardReader;
  /** Records handed on since the last checkpoint written, and when it was written. */
  sinceCheckpoint: number;
  checkpointedAt: number;
}

/** What the poller asks before and while it reads a shard. */
export interface ShardClaims {
  /** @param parentShard the shard's parent, while the stream still lists it */
  take(shard: ShardReader, readyShards: number, parentShard?: ShardReader): Promise<boolean>;
  holds(shardId: string): boolean;
  advanced(shard: ShardReader, records: number): void;
  drained(shard: ShardReader): Promise<void>;
}

export class ShardOwnership implements ShardClaims {
  private readonly held = new Map<string, Holding>();
  private replicas: number | undefined;
  /** The earliest end of another replica's lease met since the last round. */
  private expiring: number | undefined;
  private readonly now: () => number;
  /** Takeovers, hand-backs and losses so far. */
  readonly counts = { taken: 0, handedBack: 0, lost: 0 };

  constructor(private readonly options: OwnershipOptions) {
    this.now = options.now ?? Date.now;
  }

  get owned() {
    return [...this.held.keys()];
  }

  /** Per shard held: records read past the checkpoint, and seconds since it was written. */
  checkpointLag() {
    const at = this.now();
    return [...this.held].map(([shard, h]) => ({ shard, records: h.sinceCheckpoint, seconds: (at - h.checkpointedAt) / 1000 }));
  }

  /**
   * Takes the shard when it is this replica's to read: lineage allows it (its parent drained,
   * by whichever replica), nobody holds it, and this replica is under its share. Sets where
   * reading starts: after the checkpoint; at the start of a child; else at the latest record.
   */
  async take(shard: ShardReader, readyShards: number, parentShard?: ShardReader) {
    if (this.held.has(shard.id)) return true;
    const { leases, replicaId, ttlSeconds } = this.options;
    const row = await leases.read(shard.id);
    if (row?.drained) {
      shard.state = 'drained';
      return false;
    }
    const held = heldByOther(row, replicaId, this.now());
    if (held) {
      // Tried again the moment it runs out: a dead holder's shard is taken within its lease.
      this.expiring = Math.min(this.expiring ?? Number.POSITIVE_INFINITY, held.expiresAt.getTime());
      return false;
    }
    // A child waits until its parent (still listed) is drained, by this replica or another.
    if (parentShard && parentShard.state !== 'drained') return false;
    const parent = parentShard ? await leases.read(parentShard.id) : null;
    if (!row && !parent && shard.closed) {
      // Closed before any replica read it or its parent: its history is in the table.
      shard.state = 'drained';
      return false;
    }
    if (!mayTake(this.held.size, readyShards, this.replicas)) return false;
    const lease = await leases.acquire(shard.id, replicaId, ttlSeconds, row);
    if (!lease) return false;
    shard.iterator = undefined;
    shard.lastSeq = lease.checkpoint;
    // A child of a shard read to its end is read whole; a shard nobody read yet, from now.
    shard.start = parent ? 'TRIM_HORIZON' : 'LATEST';
    // Held before without a checkpoint: what came between is only in the table.
    shard.resyncOnOpen = !lease.checkpoint && !parent && row !== null;
    this.held.set(shard.id, { lease, shard, sinceCheckpoint: 0, checkpointedAt: this.now() });
    this.counts.taken++;
    this.options.log.info(`stream: reading shard ${shard.id} (token ${lease.token}, from ${lease.checkpoint ?? shard.start})`);
    return true;
  }

  /** Whether to read on: the lease is this replica's for at least another quarter of its length. */
  holds(shardId: string) {
    const h = this.held.get(shardId);
    return !!h && h.lease.expiresAt.getTime() - this.now() > (this.options.ttlSeconds * 1000) / 4;
  }

  advanced(shard: ShardReader, records: number) {
    const h = this.held.get(shard.id);
    if (h) h.sinceCheckpoint += records;
  }

  /** Read to its end: say so in its row (its children may start anywhere) and let it go. */
  async drained(shard: ShardReader) {
    const h = this.held.get(shard.id);
    if (!h) return;
    this.held.delete(shard.id);
    await this.options.leases.hold({ lease: h.lease, checkpoint: shard.lastSeq, ttlSeconds: 0, drained: true });
  }

  /**
   * One round: learns how many replicas live, renews every shard held (with its checkpoint),
   * and hands one back while holding more than its share. Taking free shards is the poller's
   * rediscovery, which asks take() of each.
   */
  /** How long until the next round: a round's length, or less when another's lease runs out sooner. */
  untilNextRound(roundMs: number) {
    const soonest = this.expiring === undefined ? roundMs : this.expiring - this.now() + 1;
    return Math.max(0, Math.min(roundMs, soonest));
  }

  async round(readyShards: number) {
    this.expiring = undefined;
    this.replicas = await this.options.replicas().catch(() => undefined);
    for (const [id, h] of this.held) {
      const checkpoint = h.shard.lastSeq;
      const records = h.sinceCheckpoint;
      try {
        const lease = await this.options.leases.hold({ lease: h.lease, checkpoint, ttlSeconds: this.options.ttlSeconds });
        if (this.held.get(id) !== h) continue;
        if (!lease) {
          this.lose(id, 'its lease was taken or ran out');
          continue;
        }
        h.lease = lease;
        h.sinceCheckpoint -= records;
        h.checkpointedAt = this.now();
      } catch (err) {
        // Not renewed this round: holds() turns false before the lease runs out.
        this.options.log.warn(`stream: renewing shard ${id} failed (${err instanceof Error ? err.message : String(err)})`);
      }
    }
    if (toHandBack(this.held.size, readyShards, this.replicas) > 0) {
      const [id] = [...this.held.keys()].slice(-1);
      if (id) await this.handBack(id);
    }
    return fairShare(readyShards, this.replicas);
  }

  /** Hands every shard back with its checkpoint (a graceful stop: the others take over at once). */
  async handBackAll() {
    await Promise.all([...this.held.keys()].map((id) => this.handBack(id)));
  }

  private async handBack(id: string) {
    const h = this.held.get(id);
    if (!h) return;
    this.held.delete(id);
    this.counts.handedBack++;
    try {
      await this.options.leases.hold({ lease: h.lease, checkpoint: h.shard.lastSeq, ttlSeconds: 0 });
    } catch (err) {
      this.options.log.warn(`stream: handing back shard ${id} failed; it frees when its lease runs out (${String(err)})`);
    }
  }

  private lose(id: string, why: string) {
    this.held.delete(id);
    this.counts.lost++;
    this.options.log.warn(`stream: shard ${id} is no longer this replica's: ${why}`);
  }
}
