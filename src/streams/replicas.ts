/**
 * What a replica needs beside its own hub when several share one table (RUNPLANE_REDIS_URL):
 * Redis fan-out of changes (bounded in bytes, shared between tenants; the changes sent as
 * notices read from the table), the replica count kept in Redis, and shard ownership by lease
 * in the table, renewed in rounds of a third of the lease.
 */
import { sleep } from '../lib/backoff.ts';
import type { Logger } from '../lib/logger.ts';
import type { ShardLeases } from '../store/leases/shards.ts';
import type { Change } from './changes.ts';
import { NoticeReads, type NoticeTable } from './fanout/notices.ts';
import { HEARTBEAT_MS, RedisFanout } from './fanout/redis.ts';
import { SharedUsage } from './fanout/usage.ts';
import type { Hub } from './hub.ts';
import { ShardOwnership } from './ownership.ts';

export interface ReplicaOptions {
  redisUrl: string;
  /** Seals every Redis entry (RUNPLANE_REDIS_SECRET): entries without its seal are dropped. */
  redisSecret: string;
  /** Keys in Redis are named after the table: replicas of one table find each other. */
  tableName: string;
  replicaId: string;
  leases: ShardLeases;
  /** How long a shard lease lasts without renewal (a dead replica's shards wait this long). */
  shardLeaseSeconds: number;
  /** The largest change sent whole through Redis, in bytes (RUNPLANE_REDIS_ENTRY_BYTES); a larger one goes as a notice. */
  entryBytes: number;
  /** Entries the Redis Stream keeps (RUNPLANE_REDIS_STREAM_LENGTH): with entryBytes, its bound in bytes (fanout/bounds.ts). */
  streamLength: number;
  /** Bytes each tenant may send through Redis each second (RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND); past it, notices. */
  tenantBytesPerSecond: number;
  /** Sends in flight to Redis before changes are not sent (tests lower it). */
  maxSendsInFlight?: number;
}

/** While degraded, subscribers are filled from the table this often. */
export const DEGRADED_FILL_MS = 1_000;

export type Replicas = ReturnType<typeof createReplicas>;

/** `table`: where the changes that came as notices are read. */
export function createReplicas(options: ReplicaOptions, hub: Hub, log: Logger, table: NoticeTable) {
  // Made below; the fan-out's heartbeats ask it how many shards this replica reads.
  let ownership: ShardOwnership | undefined;
  const resync = (reason: string) => {
    log.warn(`subscribers re-read from the table: ${reason}`);
    hub.resync();
  };
  const notices = new NoticeReads({ hub, table, onLost: resync });
  const fanout = new RedisFanout({
    url: options.redisUrl,
    secret: options.redisSecret,
    entryBytes: options.entryBytes,
    maxLen: options.streamLength,
    tenantBytesPerSecond: options.tenantBytesPerSecond,
    shardsOwned: () => ownership?.owned.length ?? 0,
    shardLeaseMs: options.shardLeaseSeconds * 1000,
    prefix: `runplane:${options.tableName}`,
    replicaId: options.replicaId,
    onChange: (change) => hub.publish(change),
    onNotice: (notice) => notices.take(notice),
    onResync: resync,
    log,
    maxSendsInFlight: options.maxSendsInFlight,
  });
  const roundMs = (options.shardLeaseSeconds * 1000) / 3;
  ownership = new ShardOwnership({
    leases: options.leases,
    replicaId: options.replicaId,
    ttlSeconds: options.shardLeaseSeconds,
    // A replica not seen for a whole lease is gone.
    replicas: () => fanout.replicas(options.shardLeaseSeconds * 1000),
    log,
  });
  // Per-tenant caps counted over every replica (what each holds, shared each second).
  const usage = new SharedUsage({
    redis: fanout.connection,
    prefix: `runplane:${options.tableName}`,
    replicaId: options.replicaId,
    secret: options.redisSecret,
    replicas: () => fanout.members(options.shardLeaseSeconds * 1000),
  });
  const stopping = new AbortController();
  let rounds: Promise<void> | undefined;
  // While degraded, the feeds read from the table each interval; when it ends, once more (every feed, tenant-wide ones too).
  let wasDegraded = false;
  const filling = setInterval(() => {
    const degraded = fanout.degraded !== undefined;
    if (degraded) hub.refill();
    else if (wasDegraded) hub.resync();
    wasDegraded = degraded;
  }, DEGRADED_FILL_MS);
  filling.unref();

  return {
    fanout,
    usage,
    ownership: ownership as ShardOwnership,
    replicaId: options.replicaId,
    /** A change this replica learned of first: its own subscribers now, the others through Redis. */
    publish(change: Change) {
      hub.publish(change);
      fanout.publish(change);
    },
    /** Records may have been lost: every replica's subscribers re-read from the table. */
    resyncAll() {
      hub.resync();
      fanout.resyncOthers();
    },
    async start() {
      await fanout.start();
      // The replicas are counted by their heartbeats: hear them once before taking a share of shards.
      await sleep(HEARTBEAT_MS * 1.5);
      // Knows how many replicas there are before it takes its first shards.
      await ownership.round(0);
    },
    /** Renews, balances and takes shards in rounds until stopped. */
    run(poller: { readyShards: number; rediscover(): Promise<void> }) {
      rounds = (async () => {
        while (!stopping.signal.aborted) {
          await sleep(ownership.untilNextRound(roundMs), stopping.signal);
          if (stopping.signal.aborted) return;
          try {
            await ownership.round(poller.readyShards);
            await poller.rediscover();
          } catch (err) {
            log.warn(`stream: ownership round failed (${err instanceof Error ? err.message : String(err)})`);
          }
        }
      })();
    },
    /** Rounds stop first; once the poller has stopped, `leave` hands the shards back and leaves Redis. */
    async stopRounds() {
      clearInterval(filling);
      stopping.abort();
      await rounds;
    },
    async leave() {
      await usage.stop();
      await ownership.handBackAll();
      await fanout.stop();
    },
  };
}
