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
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createStore, isDynaliteOperation, runAction, validate } from './dynalite.ts';
import { Faults } from './faults.ts';
import { createProtocol } from './http.ts';
import { createItemWrites } from './items.ts';
import { DYNAMODB_SERVICE, STREAMS_SERVICE, unsupported } from './operations.ts';
import { createStreamsApi, type StreamsOperation, streamsOperations } from './streams/api.ts';
import { StreamLog } from './streams/log.ts';
import { createTables } from './tables.ts';
import { createTransactions } from './transactions.ts';
import { createTtl } from './ttl.ts';

export { type FaultError, type FaultRule, Faults, type InjectedFault } from './faults.ts';

export interface EngineOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** Address to listen on (default 127.0.0.1). */
  host?: string;
  /** LevelDB folder for data that outlives the process; in memory when absent. */
  dataDir?: string;
  /** The clock for stream records, iterator expiry and TTL (tests move it instead of sleeping). */
  now?: () => number;
  /** Shard iterator lifetime (default 15 minutes, as DynamoDB). */
  iteratorTtlMs?: number;
  /** Stream record retention (default 24 hours, as DynamoDB). */
  streamRetentionMs?: number;
  /** A shard closes and gets a child after this long (default 4 hours). */
  shardMaxAgeMs?: number;
  /** ... or after this many records (default 100,000). */
  shardMaxRecords?: number;
  /** How often expired items are looked for (default 10 s). */
  ttlSweepIntervalMs?: number;
  /** How late after its expiry an item is deleted (default 0). */
  ttlDeleteDelayMs?: number;
  /** How long a new table stays CREATING (default 0). */
  createTableMs?: number;
  /** Where unexpected internal errors are reported (default console.error). */
  onError?: (err: unknown) => void;
}

export interface Engine {
  /** `http://host:port`, for the SDK's `endpoint` option. */
  readonly endpoint: string;
  readonly port: number;
  readonly faults: Faults;
  /**
   * Answers a request in this process, without HTTP: a server embedding the engine talks
   * to it this way (other processes use the port). Same protocol, same answers.
   */
  answer(target: string, body: string): Promise<{ status: number; body: string }>;
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
  };
  /** Stops listening, waits for requests in flight, and closes the database. */
  close(): Promise<void>;
}

const MINUTE = 60_000;

export async function startEngine(options: EngineOptions = {}): Promise<Engine> {
  const now = options.now ?? Date.now;
  const onError = options.onError ?? ((err: unknown) => console.error('engine: unexpected error', err));
  if (options.dataDir) mkdirSync(options.dataDir, { recursive: true });
  const store = createStore({ path: options.dataDir, createTableMs: options.createTableMs ?? 0 });
  try {
    await store.db.open();
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    if (cause?.code === 'LEVEL_LOCKED') {
      throw new Error(`engine: the data folder ${options.dataDir} is in use by another process`, { cause: err });
    }
    throw err;
  }

  const streamOptions = {
    retentionMs: options.streamRetentionMs ?? 24 * 60 * MINUTE,
    shardMaxAgeMs: options.shardMaxAgeMs ?? 4 * 60 * MINUTE,
    shardMaxRecords: options.shardMaxRecords ?? 100_000,
  };
  const log = new StreamLog(store.db, store.tableDb.awsRegion, now, streamOptions);
  await log.load();
  const items = createItemWrites(store, log);
  const ttl = createTtl(store, store.db, items.write, now, {
    sweepIntervalMs: options.ttlSweepIntervalMs ?? 10_000,
    deleteDelayMs: options.ttlDeleteDelayMs ?? 0,
  });
  await ttl.load();
  const tables = createTables(store, log, ttl.forget);
  const transactions = createTransactions(store, log, now);
  const streamsApi = createStreamsApi(log, now, { iteratorTtlMs: options.iteratorTtlMs ?? 15 * MINUTE });
  const faults = new Faults();

  const dynamodb: Record<string, (body: Record<string, unknown>) => Promise<unknown>> = {
    PutItem: (body) => items.write('PutItem', body),
    UpdateItem: (body) => items.write('UpdateItem', body),
    DeleteItem: (body) => items.write('DeleteItem', body),
    BatchWriteItem: items.batchWrite,
    TransactWriteItems: transactions.write,
    TransactGetItems: transactions.get,
    CreateTable: tables.create,
    UpdateTable: tables.update,
    DeleteTable: tables.remove,
    DescribeTable: tables.describe,
    UpdateTimeToLive: ttl.update,
    DescribeTimeToLive: ttl.describe,
  };

  const inFlight = new Set<Promise<unknown>>();
  async function dispatch(service: string, operation: string, body: Record<string, unknown>) {
    if (service === DYNAMODB_SERVICE) {
      const handler = dynamodb[operation];
      if (!handler && !isDynaliteOperation(operation)) throw unsupported(service, operation);
      const afterwards = await faults.apply(operation, body);
      // Reads and table listing: dynalite as it is, always through its validation.
      const result = await (handler ? handler(body) : runAction(operation as never, store, validate(operation as never, body, store)));
      if (afterwards) throw afterwards;
      return result;
    }
    if (service === STREAMS_SERVICE && streamsOperations.includes(operation as StreamsOperation)) {
      const afterwards = await faults.apply(operation, body);
      const result = streamsApi.handle(operation as StreamsOperation, body);
      if (afterwards) throw afterwards;
      return result;
    }
    throw unsupported(service, operation);
  }
  const tracked = (service: string, operation: string, body: Record<string, unknown>) => {
    const work = dispatch(service, operation, body);
    inFlight.add(work);
    const done = () => inFlight.delete(work);
    work.then(done, done);
    return work;
  };

  let closing: Promise<void> | undefined;
  const protocol = createProtocol(tracked, onError, () => closing !== undefined);
  const server: Server = createServer({ keepAliveTimeout: 60_000 }, protocol.http);
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  // Background upkeep, one pass at a time: stream rollover and trimming, TTL sweeping.
  const timers = [
    every(Math.max(10, Math.min(MINUTE, streamOptions.retentionMs / 4, streamOptions.shardMaxAgeMs / 4)), () => log.tick()),
    every(ttl.intervalMs, () => ttl.sweep()),
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
    endpoint: `http://${host}:${address.port}`,
    port: address.port,
    faults,
    answer: protocol.answer,
    control: {
      rolloverShard: (table) => log.rollover(streamOf(table)),
      expireIterators: (table) => log.expireIterators(streamOf(table)),
      trimStream: (table, before = Number.POSITIVE_INFINITY) => log.trim(streamOf(table), before),
      sweepTtl: () => ttl.sweep(),
    },
    close() {
      closing ??= (async () => {
        for (const timer of timers) timer.stop();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.allSettled(timers.map((t) => t.idle()));
        while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
        for (const socket of sockets) socket.destroy();
        await closed;
        await log.flush();
        await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));
      })();
      return closing;
    },
  };
}
