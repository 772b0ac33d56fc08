/**
 * The embedded DynamoDB-compatible engine: dynalite for tables, items, expressions and
 * conditional writes, completed with DynamoDB Streams, transactions,
 * ReturnValuesOnConditionCheckFailure, TTL expiry and fault injection. One HTTP port
 * serves both the DynamoDB and the DynamoDB Streams protocol, so the AWS SDK's
 * DynamoDBClient and DynamoDBStreamsClient work against it unchanged.
 *
 * This folder imports nothing from the rest of Runplane.
 */
import { mkdirSync } from 'node:fs';
import { createDispatch } from './dispatch.ts';
import { createStore, type Store } from './dynalite.ts';
import { Faults } from './faults.ts';
import { createProtocol } from './http.ts';
import { ItemLocks } from './item-locks.ts';
import { createItemWrites } from './items.ts';
import { listen } from './listener.ts';
import { type EngineOptions, withDefaults } from './options.ts';
import { createStreamsApi } from './streams/api.ts';
import { StreamLog } from './streams/log.ts';
import { createTables } from './tables.ts';
import { createTransactions } from './transactions/index.ts';
import { createTtl } from './ttl/index.ts';
import { TtlSettings } from './ttl/settings.ts';

export { type FaultError, type FaultRule, Faults, type InjectedFault } from './faults.ts';
export type { EngineOptions } from './options.ts';

export interface Engine {
  /** `http://host:port`, for the SDK's `endpoint` option. */
  readonly endpoint: string;
  readonly port: number;
  readonly faults: Faults;
  /**
   * Answers a request in this process, without HTTP: a server embedding the engine talks
   * to it this way (other processes use the port). Same protocol, same answers, in the
   * engine's region unless `region` says another.
   */
  answer(target: string, body: string, region?: string): Promise<{ status: number; body: string }>;
  /** Test controls for what DynamoDB does on its own schedule. */
  readonly control: {
    /** Closes the table's open shard and opens a child. */
    rolloverShard(table: string): void;
    /** Expires every shard iterator issued so far for the table's stream. */
    expireIterators(table: string): Promise<void>;
    /** Trims the table's stream: records created before `before` (default: all). */
    trimStream(table: string, before?: number): Promise<number>;
    /** Runs the TTL sweeper now; resolves to the number of items deleted. */
    sweepTtl(): Promise<number>;
    /** Deletes the ClientRequestTokens whose 10 minutes have passed (done every minute anyway); resolves to how many. */
    pruneTokens(): Promise<number>;
  };
  /** What the engine holds and has done, for tests and benchmarks (figures, not a stable API). */
  stats(): EngineStats;
  /** Stops listening, waits for requests in flight, and closes the database. */
  close(): Promise<void>;
}

export interface EngineStats {
  /** Item locks: held now, requests waiting now, requests that gave up (TransactionConflict) so far. */
  locks: { held: number; waiting: number; conflicts: number };
  /** ClientRequestTokens: of transactions in flight now; deleted after their window so far. */
  tokens: { inFlight: number; pruned: number };
  /** TTL: expiry index entries the sweeper examined and items it deleted, items indexed when TTL was enabled, so far. */
  ttl: { itemsTouched: number; itemsDeleted: number; itemsIndexed: number };
  /**
   * Stream records: in the memory cache now (count, bytes), reads served from it or from disk
   * so far, and records read at start (the last one of each stream, however long it is).
   */
  streams: { cachedRecords: number; cachedBytes: number; cacheHits: number; diskReads: number; readAtStart: number };
}

const MINUTE = 60_000;
/**
 * LevelDB tables kept open at once (LevelDB's default is 1,000). Each open table holds its
 * index in memory, so the default lets memory grow with the data up to about 3 GB of it;
 * past this bound a read of an old table opens it again (slower, and rare: reads go mostly
 * to recent data).
 */
const LEVELDB_MAX_OPEN_FILES = 128;

async function openStore(dataDir: string | undefined, createTableMs: number) {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const store = createStore({ path: dataDir, createTableMs });
  try {
    await store.db.open({ maxOpenFiles: LEVELDB_MAX_OPEN_FILES });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    if (cause?.code === 'LEVEL_LOCKED') {
      throw new Error(`engine: the data folder ${dataDir} is in use by another process`, { cause: err });
    }
    throw err;
  }
  return store;
}

export async function startEngine(options: EngineOptions = {}): Promise<Engine> {
  const settings = withDefaults(options);
  const { now, onError } = settings;
  const store: Store = await openStore(settings.dataDir, settings.createTableMs);
  // Tables created from now on carry the engine's region in their ARNs.
  store.tableDb.awsRegion = settings.region;

  const log = new StreamLog(store.db, settings.region, now, settings.stream);
  await log.load();
  const locks = new ItemLocks({ waitMs: settings.lockWaitMs, maxWaitersPerItem: settings.limits.lockWaitersPerItem });
  const ttlSettings = new TtlSettings(store.db);
  const storage = { store, log, locks, expiry: ttlSettings };
  const items = createItemWrites(storage);
  const ttl = createTtl({ store, settings: ttlSettings, write: items.write, now, onError }, settings.ttl);
  await ttl.load();
  const tables = createTables(store, log, ttl);
  await tables.recover();
  const transactions = createTransactions(storage, now, settings.limits.pendingTokens);
  const streamsApi = createStreamsApi(log, now, { iteratorTtlMs: settings.iteratorTtlMs });
  const faults = new Faults();

  const dispatch = createDispatch({
    store,
    faults,
    dynamodb: {
      PutItem: (body, { stall }) => items.write('PutItem', body, { stall }),
      UpdateItem: (body, { stall }) => items.write('UpdateItem', body, { stall }),
      DeleteItem: (body, { stall }) => items.write('DeleteItem', body, { stall }),
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
  const inFlight = new Set<Promise<unknown>>();
  const tracked: typeof dispatch = (...request) => {
    const work = dispatch(...request);
    inFlight.add(work);
    const done = () => inFlight.delete(work);
    work.then(done, done);
    return work;
  };

  let closing: Promise<void> | undefined;
  const protocol = createProtocol(tracked, {
    onUnexpected: onError,
    isClosing: () => closing !== undefined,
    defaultRegion: settings.region,
  });
  const listener = await listen(settings.port, settings.host, protocol.http);

  // Background upkeep, one pass at a time: stream rollover and trimming, TTL sweeping.
  const { retentionMs, shardMaxAgeMs } = settings.stream;
  const timers = [
    every(Math.max(10, Math.min(MINUTE, retentionMs / 4, shardMaxAgeMs / 4)), () => log.tick()),
    every(ttl.intervalMs, () => ttl.sweep()),
    every(MINUTE, () => transactions.pruneTokens()),
  ];
  function every(ms: number, task: () => Promise<unknown>) {
    let running: Promise<unknown> | undefined;
    const timer = setInterval(() => {
      if (running) return;
      running = task()
        .catch(onError)
        .finally(() => {
          running = undefined;
        });
    }, ms);
    timer.unref();
    return { stop: () => clearInterval(timer), idle: () => running ?? Promise.resolve() };
  }

  const streamOf = (table: string) => {
    const stream = log.current(table);
    if (!stream) throw new Error(`table ${table} has no enabled stream`);
    return stream;
  };

  return {
    endpoint: listener.endpoint,
    port: listener.port,
    faults,
    answer: protocol.answer,
    stats: () => ({ locks: locks.stats(), tokens: transactions.tokenStats(), streams: log.stats(), ttl: ttl.stats() }),
    control: {
      rolloverShard: (table) => log.rollover(streamOf(table)),
      expireIterators: (table) => log.expireIterators(streamOf(table)),
      trimStream: (table, before = Number.POSITIVE_INFINITY) => log.trim(streamOf(table), before),
      sweepTtl: () => ttl.sweep(),
      pruneTokens: () => transactions.pruneTokens(),
    },
    close() {
      closing ??= (async () => {
        for (const timer of timers) timer.stop();
        const closed = listener.stopListening();
        await Promise.allSettled(timers.map((t) => t.idle()));
        while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
        listener.dropConnections();
        await closed;
        await ttl.close();
        await log.flush();
        await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));
      })();
      return closing;
    },
  };
}
