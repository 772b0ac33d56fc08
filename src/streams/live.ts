/** What subscriptions are made of: the hub, the feeds, and the poller feeding them. */
import type { Stores } from '../context.ts';
import type { Clients } from '../table/client.ts';
import { decodeRecord } from './changes.ts';
import { eventFeed } from './event-feed.ts';
import { Hub } from './hub.ts';
import { type PollerOptions, StreamPoller } from './poller.ts';
import { leaseFeed, runFeed } from './state-feeds.ts';

export interface LiveOptions {
  clients: Pick<Clients, 'dynamo' | 'pollerStreams'>;
  tableName: string;
  stores: Stores;
  poll?: Pick<PollerOptions, 'minIntervalMs' | 'idleIntervalMs' | 'maxBackoffMs'>;
  log?: (message: string) => void;
}

export type Live = Awaited<ReturnType<typeof startLive>>;

export async function startLive({ clients, tableName, stores, poll, log }: LiveOptions) {
  const hub = new Hub();
  const onError = (err: unknown) => log?.(`subscription failed: ${err instanceof Error ? err.message : String(err)}`);
  const poller = new StreamPoller({
    streams: clients.pollerStreams,
    dynamo: clients.dynamo,
    tableName,
    ...poll,
    log,
    onRecords(records) {
      for (const record of records) {
        let change: ReturnType<typeof decodeRecord>;
        try {
          change = decodeRecord(record);
        } catch (err) {
          // A row we cannot read (written by someone else, by hand) is skipped, not retried forever.
          log?.(`stream record ${record.dynamodb?.SequenceNumber} skipped: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
        if (change) hub.publish(change);
      }
    },
    onLost(reason) {
      log?.(`stream: ${reason}; subscribers re-read from the table`);
      hub.resync();
    },
  });
  await poller.start();
  const deps = { hub, stores, onError };
  return {
    hub,
    poller,
    runEvents: (tenant: string, runId: string, afterSeq?: number, types?: readonly string[]) =>
      eventFeed({ hub, events: stores.events, tenant, runId, afterSeq, types, onError }),
    runChanged: (tenant: string, runId: string) => runFeed(deps, tenant, runId),
    leaseChanged: (tenant: string, unitId: string) => leaseFeed(deps, tenant, unitId),
    stop: () => poller.stop(),
  };
}
