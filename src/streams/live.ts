/** What subscriptions are made of: the hub, the feeds, and the poller feeding them. */
import type { OutputChunk } from '../domain/output.ts';
import { type Logger, silentLogger } from '../lib/logger.ts';
import { DEFAULT_SEND_BUFFER_BYTES, SendBuffer } from '../lib/send-buffer.ts';
import { ReadShares, type Stores } from '../store/index.ts';
import type { Clients } from '../table/client.ts';
import { type Change, decodeRecord } from './changes.ts';
import { type EventFeedOptions, eventFeed } from './event-feed.ts';
import { feedTable } from './feed-table.ts';
import { Hub } from './hub.ts';
import { lazily, type Source } from './lazy.ts';
import { OutputFeed, type OutputFeedOptions } from './output-feed.ts';
import { type PollerOptions, StreamPoller } from './poller.ts';
import { createReplicas, type ReplicaOptions } from './replicas.ts';
import { type LeaseFeedQuery, leaseFeed, type RunFeedQuery, runFeed } from './state-feeds.ts';
import { type LeasesFeedQuery, leasesFeed, type RunsFeedQuery, runsFeed } from './tenant-feeds.ts';

export interface LiveOptions {
  clients: Pick<Clients, 'dynamo' | 'pollerStreams'>;
  tableName: string;
  stores: Stores;
  /** Table reads in flight shared between tenants (the server's, shared with requests); absent: a share of this server's own. */
  readShares?: ReadShares;
  poll?: Pick<PollerOptions, 'minIntervalMs' | 'idleIntervalMs' | 'maxBackoffMs'>;
  log?: Logger;
  /** How long a run's feed waits for a missing seq before it steps over it (and says so). */
  gapWaitMs?: number;
  /** With several replicas on one table: Redis fan-out and shards read by lease (absent: this one reads every shard). */
  replicas?: ReplicaOptions;
  /** Output text accepted on this server and not stored yet (store/outputs/writer.ts). */
  outputWaiting?: (tenant: string, runId: string, stream: string) => OutputChunk | undefined;
  /** How long live output ahead of a reader waits before the table is read again (about a flush interval). */
  outputGapMs?: number;
}

/** What a runOutput subscription asks for. */
export type RunOutputQuery = Pick<OutputFeedOptions, 'tenant' | 'runId' | 'stream' | 'afterOffset'> & { sendBuffer?: SendBuffer };

/** What a runEvents subscription asks for. */
export type RunEventsQuery = Pick<EventFeedOptions, 'tenant' | 'runId' | 'afterSeq' | 'types'> & { sendBuffer?: SendBuffer };

export type Live = Awaited<ReturnType<typeof startLive>>;

export async function startLive({
  clients,
  tableName,
  stores,
  readShares = new ReadShares({ total: 64, perTenant: 16 }),
  poll,
  log = silentLogger,
  gapWaitMs,
  replicas: shared,
  outputWaiting,
  outputGapMs = 350,
}: LiveOptions) {
  const onError = (err: unknown) => log.warn(`subscription failed: ${err instanceof Error ? err.message : String(err)}`);
  const hub = new Hub(onError);
  const replicas = shared
    ? createReplicas(shared, hub, log, {
        // Within the tenant's share of reads in flight, as its feeds' reads are.
        runHead: (tenant, runId) =>
          stores.runs.read(tenant, runId, { consistent: true, eventLimit: 0, reads: { begin: () => readShares.acquire(tenant) } }),
        lease: (tenant, unitId) => stores.leases.read(tenant, unitId, { begin: () => readShares.acquire(tenant) }),
      })
    : undefined;
  /** A change this replica learned of first: to its subscribers, and to the other replicas'. */
  const publish = replicas ? replicas.publish : (change: Change) => hub.publish(change);
  /** Feeds reading from the table because their subscriber fell behind. */
  const feedStats = { lagging: 0 };
  /** Open subscriptions, to end them on shutdown. */
  const open = new Set<Source<unknown>>();
  const track = (source: Source<unknown>) => {
    open.add(source);
    return () => open.delete(source);
  };
  const poller = new StreamPoller({
    streams: clients.pollerStreams,
    dynamo: clients.dynamo,
    tableName,
    ...poll,
    log,
    claims: replicas?.ownership,
    onRecords(records) {
      for (const record of records) {
        let change: ReturnType<typeof decodeRecord>;
        try {
          change = decodeRecord(record);
        } catch (err) {
          // A row we cannot read (written by someone else, by hand) is skipped, not retried forever.
          log.warn(`stream record ${record.dynamodb?.SequenceNumber} skipped: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
        if (change) publish(change);
      }
    },
    onLost(reason) {
      log.warn(`stream: ${reason}; subscribers re-read from the table`);
      if (replicas) replicas.resyncAll();
      else hub.resync();
    },
  });
  await replicas?.start();
  try {
    await poller.start();
  } catch (err) {
    await replicas?.leave();
    throw err;
  }
  replicas?.run(poller);
  const stop = async () => {
    await replicas?.stopRounds();
    await poller.stop();
    await replicas?.leave();
  };
  /**
   * What a feed reads the table through: its connection's send buffer (one of its own without
   * a connection) and its tenant's share of reads in flight.
   */
  const reading = <Q extends { tenant: string; sendBuffer?: SendBuffer }>(query: Q) => {
    const sendBuffer = query.sendBuffer ?? new SendBuffer(DEFAULT_SEND_BUFFER_BYTES);
    return { ...query, sendBuffer, table: feedTable(stores, readShares, query.tenant, sendBuffer) };
  };
  return {
    hub,
    poller,
    /** Present when replicas share the table through Redis. */
    replicas,
    publish,
    /** Subscriptions being served now. */
    get openSubscriptions() {
      return open.size;
    },
    /** Event feeds whose subscriber fell behind, reading from the table until it catches up. */
    get laggingFeeds() {
      return feedStats.lagging;
    },
    runEvents: (query: RunEventsQuery) => lazily(() => eventFeed({ hub, ...reading(query), gapWaitMs, stats: feedStats, onError }), track),
    runChanged: (query: RunFeedQuery) =>
      lazily(() => {
        const { table, ...rest } = reading(query);
        return runFeed({ hub, table, onError }, rest);
      }, track),
    leaseChanged: (query: LeaseFeedQuery) =>
      lazily(() => {
        const { table, ...rest } = reading(query);
        return leaseFeed({ hub, table, onError }, rest);
      }, track),
    runsChanged: (query: RunsFeedQuery) =>
      lazily(() => {
        const { table, ...rest } = reading(query);
        return runsFeed({ hub, table }, rest);
      }, track),
    leasesChanged: (query: LeasesFeedQuery) => lazily(() => leasesFeed({ hub }, query), track),
    runOutput: (query: RunOutputQuery) =>
      lazily(
        () =>
          new OutputFeed({
            hub,
            ...reading(query),
            waiting: () => outputWaiting?.(query.tenant, query.runId, query.stream),
            gapWaitMs: outputGapMs,
            onError,
          }),
        track,
      ),
    /** Completes every open subscription (its client gets what is queued, then the end). */
    endSubscriptions() {
      for (const source of open) (source as { end?: () => void }).end?.();
      open.clear();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
