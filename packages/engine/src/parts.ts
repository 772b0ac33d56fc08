/**
 * The engine's parts wired together: the stream log, item locks, item writes, TTL, tables,
 * transactions and the Streams API, and the routing of every operation to one of them.
 */
import { createThroughput } from './capacity/index.ts';
import { createMeteredReads } from './capacity/reads.ts';
import { createDispatch } from './dispatch.ts';
import type { Store } from './dynalite.ts';
import { Faults } from './faults.ts';
import { ItemLocks } from './item-locks.ts';
import { createItemWrites } from './items.ts';
import type { Settings } from './options.ts';
import { createStreamsApi } from './streams/api.ts';
import { StreamLog } from './streams/log.ts';
import { createTables } from './tables.ts';
import { createTransactions } from './transactions/index.ts';
import { createTtl } from './ttl/index.ts';
import { TtlSettings } from './ttl/settings.ts';

/** Builds the parts on an open store, reading back what they keep in it (streams, TTL settings). */
export async function assemble(settings: Settings, store: Store) {
  const { now, onError } = settings;
  const log = new StreamLog(store.db, settings.region, now, settings.stream);
  await log.load();
  const locks = new ItemLocks({ waitMs: settings.lockWaitMs, maxWaitersPerItem: settings.limits.lockWaitersPerItem });
  const ttlSettings = new TtlSettings(store.db);
  const throughput = createThroughput(settings);
  const storage = { store, log, locks, expiry: ttlSettings, throughput };
  const items = createItemWrites(storage);
  const ttl = createTtl({ store, settings: ttlSettings, write: items.write, now, onError }, settings.ttl);
  await ttl.load();
  const tables = createTables(store, log, ttl);
  await tables.recover();
  const transactions = createTransactions(storage, now, { maxPendingTokens: settings.limits.pendingTokens, inMemory: !settings.dataDir });
  const streamsApi = createStreamsApi(log, now, { iteratorTtlMs: settings.iteratorTtlMs });
  const faults = new Faults();
  const metered = throughput && createMeteredReads(store, throughput);

  const { dispatch, serves } = createDispatch({
    store,
    faults,
    dynamodb: {
      PutItem: (body, { stall, region }) => items.write('PutItem', body, { stall, region }),
      UpdateItem: (body, { stall, region }) => items.write('UpdateItem', body, { stall, region }),
      DeleteItem: (body, { stall, region }) => items.write('DeleteItem', body, { stall, region }),
      // Reads are dynalite's own unless the throughput model has to take their units.
      ...(metered ? { GetItem: metered.get, Query: metered.query } : {}),
      BatchWriteItem: items.batchWrite,
      TransactWriteItems: transactions.write,
      TransactGetItems: transactions.get,
      CreateTable: tables.create,
      UpdateTable: tables.update,
      DeleteTable: tables.remove,
      DescribeTable: tables.describe,
      UpdateTimeToLive: ttl.update,
      DescribeTimeToLive: ttl.describe,
    },
    streams: streamsApi.handle,
  });
  return { log, locks, ttl, transactions, faults, dispatch, serves, throughput };
}
