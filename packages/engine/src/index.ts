/**
 * The embedded DynamoDB-compatible engine: dynalite for tables, items, expressions and
 * conditional writes, completed with DynamoDB Streams, transactions,
 * ReturnValuesOnConditionCheckFailure, TTL expiry and fault injection. One HTTP port
 * serves both the DynamoDB and the DynamoDB Streams protocol, so the AWS SDK's
 * DynamoDBClient and DynamoDBStreamsClient work against it unchanged.
 *
 * This folder imports nothing from the rest of Runplane.
 */
import { callerCheck } from './callers.ts';
import type { Faults } from './faults.ts';
import { createProtocol } from './http.ts';
import { listen } from './listener.ts';
import { openStore } from './open-store.ts';
import { type EngineOptions, withDefaults } from './options.ts';
import { assemble } from './parts.ts';
import { signatureMismatch } from './sigv4.ts';
import type { TokenStats } from './transactions/tokens.ts';
import { startUpkeep } from './upkeep.ts';

export { type FaultError, type FaultRule, Faults, type InjectedFault } from './faults.ts';
export type { EngineOptions } from './options.ts';
export type { Credentials } from './sigv4.ts';

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

/** An engine started with `listen`: it has a port only when that was true. */
export type EmbeddedEngine = Omit<Engine, 'endpoint' | 'port'> & {
  /** `http://host:port`; undefined when the engine answers this process only. */
  readonly endpoint: string | undefined;
  readonly port: number | undefined;
};

export interface EngineStats {
  /** Item locks: held now, requests waiting now, requests that gave up (TransactionConflict) so far. */
  locks: { held: number; waiting: number; conflicts: number };
  /** ClientRequestTokens: of transactions in flight now; deleted after their window so far; read from LevelDB. */
  tokens: TokenStats;
  /** TTL: expiry index entries the sweeper examined and items it deleted, items indexed when TTL was enabled, so far. */
  ttl: { itemsTouched: number; itemsDeleted: number; itemsIndexed: number };
  /**
   * Stream records: in the memory cache now (count, bytes), reads served from it or from disk
   * so far, and records read at start (the last one of each stream, however long it is).
   */
  streams: { cachedRecords: number; cachedBytes: number; cacheHits: number; diskReads: number; readAtStart: number };
  /** LevelDB iterators open now (each Query, Scan and stream read opens one and must close it). */
  iterators: { open: number };
  /** The throughput model (when on): partition buckets kept now, those used since they were last full. */
  throughput?: { writeBuckets: number; readBuckets: number };
}

/** Starts an engine listening on its port (`options.port`, default any free one). */
export function startEngine(options?: EngineOptions): Promise<Engine>;
/** `listen: false`: no port at all; the engine answers this process only (`answer`). */
export function startEngine(options: EngineOptions & { listen: boolean }): Promise<EmbeddedEngine>;
export async function startEngine(options: EngineOptions & { listen?: boolean } = {}): Promise<EmbeddedEngine> {
  const settings = withDefaults(options);
  const { onError, credentials } = settings;
  const store = await openStore(settings.dataDir, settings.createTableMs);
  // Tables created from now on carry the engine's region in their ARNs.
  store.tableDb.awsRegion = settings.region;

  const { log, locks, ttl, transactions, faults, dispatch, serves, throughput } = await assemble(settings, store);
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
    serves,
    cors: settings.cors,
    refuseCaller: callerCheck(settings),
    checkSignature: credentials && ((request) => signatureMismatch(request, credentials, settings.now())),
  });
  const listener = options.listen === false ? undefined : await listen(settings.port, settings.host, protocol.http);

  const upkeep = startUpkeep(settings, { log, ttl, transactions });
  const streamOf = (table: string) => {
    const stream = log.current(table);
    if (!stream) throw new Error(`table ${table} has no enabled stream`);
    return stream;
  };

  return {
    endpoint: listener?.endpoint,
    port: listener?.port,
    faults,
    answer: protocol.answer,
    stats: () => ({
      locks: locks.stats(),
      tokens: transactions.tokenStats(),
      streams: log.stats(),
      ttl: ttl.stats(),
      iterators: { open: store.openIterators() },
      ...(throughput ? { throughput: throughput.stats() } : {}),
    }),
    control: {
      rolloverShard: (table) => log.rollover(streamOf(table)),
      expireIterators: (table) => log.expireIterators(streamOf(table)),
      trimStream: (table, before = Number.POSITIVE_INFINITY) => log.trim(streamOf(table), before),
      sweepTtl: () => ttl.sweep(),
      pruneTokens: () => transactions.pruneTokens(),
    },
    close() {
      closing ??= (async () => {
        const closed = listener?.stopListening();
        await upkeep.stop();
        while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
        listener?.dropConnections();
        await closed;
        await ttl.close();
        await transactions.close();
        await log.flush();
        await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));
      })();
      return closing;
    },
  };
}
