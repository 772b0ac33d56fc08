/**
 * Reads the table's DynamoDB stream and hands every record to `onRecords`.
 *
 * It follows shard lineage (a child only once its parent is drained), keeps one iterator
 * per shard, and polls each shard again as soon as DynamoDB allows while records flow
 * (never more than 5 GetRecords a second per shard), backing off to `idleIntervalMs` when
 * a shard is quiet. On failures:
 * - ExpiredIteratorException: re-open after the last sequence number processed;
 * - TrimmedDataAccessException: the position is lost; re-open at the trim horizon and call
 *   `onLost`, so consumers fill from the table;
 * - throttling, network errors, the endpoint vanishing: back off with jitter, keep the iterator;
 * - a vanished shard or stream: rediscover the table's stream and call `onLost`.
 * With `claims`, it reads only the shards this replica holds. It never stops by itself; `stop()` ends it.
 */
import { EventEmitter } from 'node:events';
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type _Record, type DynamoDBStreamsClient, GetRecordsCommand } from '@aws-sdk/client-dynamodb-streams';
import { delayFor, sleep } from '../lib/backoff.ts';
import type { Logger } from '../lib/logger.ts';
import type { ShardClaims } from './ownership.ts';
import { recoverRead } from './read-failures.ts';
import { listShards, openIterator, reconcileShards, type ShardReader } from './shards.ts';

export interface PollerOptions {
  streams: DynamoDBStreamsClient;
  dynamo: DynamoDBClient;
  tableName: string;
  onRecords: (records: _Record[]) => void;
  /** Records may have been missed: consumers should fill from the table. */
  onLost: (reason: string) => void;
  /** Least time between two GetRecords on one shard (DynamoDB allows 5 a second). */
  minIntervalMs?: number;
  /** Longest time between two GetRecords on a quiet shard. */
  idleIntervalMs?: number;
  /** Longest back-off after repeated failures. */
  maxBackoffMs?: number;
  log?: Logger;
  /** With replicas: reads only the shards it holds by lease, from their checkpoints (absent: every shard). */
  claims?: ShardClaims;
}

const PAGE = 1000;

export class StreamPoller {
  private readonly minIntervalMs: number;
  private readonly idleIntervalMs: number;
  private readonly maxBackoffMs: number;
  private readonly shards = new Map<string, ShardReader>();
  private readonly running = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private streamArn: string | undefined;
  private discovering: Promise<void> | undefined;
  /** Shards with a read loop running. */
  private readonly reading = new Map<string, Promise<void>>();
  private discoverAgain = false;
  /** GetRecords calls made, for tests and metrics. */
  getRecordsCalls = 0;
  /** Failures met so far, by error name. */
  readonly failures: Record<string, number> = {};
  private readonly events = new EventEmitter();

  constructor(private readonly options: PollerOptions) {
    this.minIntervalMs = options.minIntervalMs ?? 200;
    this.idleIntervalMs = Math.max(options.idleIntervalMs ?? 300, this.minIntervalMs);
    this.maxBackoffMs = options.maxBackoffMs ?? 5000;
  }

  /** Finds the stream and opens its open shards at LATEST: from here on, every record is seen. */
  async start() {
    await this.discover(true);
  }

  /**
   * Resolves once every shard being read has answered a GetRecords that started after this
   * call with less than a full page: every record committed before it has been handed on.
   */
  async caughtUp(timeoutMs = 10_000) {
    const marks = new Map([...this.shards.values()].filter((s) => s.state === 'reading').map((s) => [s, s.calls]));
    const done = () =>
      [...marks].every(([shard, mark]) => shard.state !== 'reading' || this.shards.get(shard.id) !== shard || shard.lastQuietCall > mark);
    if (done()) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.events.off('quiet', check);
        reject(new Error(`stream poller not caught up within ${timeoutMs} ms`));
      }, timeoutMs);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.events.off('quiet', check);
        resolve();
      };
      this.events.on('quiet', check);
    });
  }

  /** Shards that may be read now (lineage allows), by this replica or another. */
  get readyShards() {
    let n = 0;
    for (const shard of this.shards.values()) if (shard.state === 'reading') n++;
    return n;
  }

  /** Lists the stream's shards again and starts reading any this replica may read now. */
  rediscover() {
    return this.discover();
  }

  /** Read loops and discoveries under way (none once stop() has resolved). */
  get busy() {
    return this.running.size + (this.discovering ? 1 : 0);
  }

  async stop() {
    this.abort.abort();
    while (this.running.size > 0 || this.discovering) {
      await Promise.allSettled([...this.running, this.discovering]);
    }
  }

  private get stopped() {
    return this.abort.signal.aborted;
  }

  /** One discovery at a time; a request during one runs another after it. */
  private discover(initial = false): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.discovering) {
      this.discoverAgain = true;
      return this.discovering;
    }
    this.discovering = (async () => {
      let failures = 0;
      do {
        this.discoverAgain = false;
        try {
          await this.discoverOnce(initial);
          failures = 0;
        } catch (err) {
          if (initial) throw err;
          this.options.log?.warn(`stream discovery failed (${describe(err)}); retrying`);
          await this.sleep(this.backoff(++failures));
          this.discoverAgain = true;
        }
      } while (this.discoverAgain && !this.stopped);
    })().finally(() => {
      this.discovering = undefined;
    });
    return this.discovering;
  }

  private async discoverOnce(initial: boolean) {
    const { Table } = await this.options.dynamo.send(new DescribeTableCommand({ TableName: this.options.tableName }), {
      abortSignal: this.abort.signal,
    });
    const arn = Table?.LatestStreamArn;
    if (!arn || !Table?.StreamSpecification?.StreamEnabled) throw new Error(`table ${this.options.tableName} has no enabled stream`);
    if (arn !== this.streamArn) {
      if (this.streamArn) {
        // A new stream: whatever the old one still held is not coming.
        this.options.onLost(`the table's stream changed to ${arn}`);
        this.shards.clear();
      }
      this.streamArn = arn;
    }
    const listed = await listShards(this.options.streams, arn, this.abort.signal);
    const claims = this.options.claims;
    for (const shard of reconcileShards(this.shards, listed, initial, this.options.onLost, !!claims)) {
      // At start, pin the position now: every record after start() returns is seen.
      if (initial && !claims && !shard.iterator) shard.iterator = await this.openIterator(shard);
      this.read(shard);
    }
  }

  /** Starts the read loop of one shard (once). */
  private read(shard: ShardReader) {
    if (this.reading.has(shard.id) || this.stopped) return;
    const loop: Promise<void> = this.claimAndRead(shard).finally(() => {
      if (this.reading.get(shard.id) === loop) this.reading.delete(shard.id);
      this.running.delete(loop);
    });
    this.reading.set(shard.id, loop);
    this.running.add(loop);
  }

  /** Reads the shard while it is this replica's (always, without claims). */
  private async claimAndRead(shard: ShardReader) {
    const claims = this.options.claims;
    if (claims) {
      const parent = shard.parentId ? this.shards.get(shard.parentId) : undefined;
      const taken = await claims.take(shard, this.readyShards, parent).catch((err) => {
        this.options.log?.warn(`stream: taking shard ${shard.id} failed (${describe(err)}); trying again next round`);
        return false;
      });
      if (!taken) {
        // Drained by another replica: its children may be ready.
        if (shard.state === 'drained') setImmediate(() => void this.discover());
        return;
      }
    }
    await this.readLoop(shard);
    // Let go (or lost): whoever reads it next opens its own iterator at the checkpoint.
    if (claims && !this.stopped) shard.iterator = undefined;
  }

  private readonly mayRead = (shard: ShardReader) => this.options.claims?.holds(shard.id) ?? true;

  private async readLoop(shard: ShardReader) {
    let interval = this.minIntervalMs;
    while (!this.stopped && this.shards.get(shard.id) === shard && shard.state === 'reading' && this.mayRead(shard)) {
      await this.sleep(shard.lastCall + interval - Date.now());
      if (this.stopped || !this.mayRead(shard)) return;
      let records: number;
      try {
        records = await this.readPage(shard);
      } catch (err) {
        if (this.stopped) return;
        const next = await recoverRead(shard, err, {
          failures: this.failures,
          onLost: this.options.onLost,
          log: this.options.log,
          backOff: (failures) => this.sleep(this.backoff(failures)),
          rediscover: () => void this.discover(),
        });
        if (next === 'stop') return;
        continue;
      }
      if (!shard.iterator) {
        // Closed and drained: its children may start now.
        shard.state = 'drained';
        await this.options.claims
          ?.drained(shard)
          .catch((err) => this.options.log?.warn(`stream: marking ${shard.id} drained failed (${describe(err)})`));
        setImmediate(() => void this.discover());
        return;
      }
      // Again as soon as allowed while records flow; slower while quiet.
      interval = records > 0 ? this.minIntervalMs : Math.min(this.idleIntervalMs, interval * 1.25);
    }
  }

  /** One GetRecords on a shard (opening its iterator first if needed); hands the records on. @returns how many came */
  private async readPage(shard: ShardReader) {
    if (!shard.iterator) {
      shard.iterator = await this.openIterator(shard);
      if (shard.resyncOnOpen) {
        shard.resyncOnOpen = false;
        this.options.onLost(`the position in ${shard.id} was lost before its first record; re-opened at the latest record`);
      }
    }
    shard.lastCall = Date.now();
    this.getRecordsCalls++;
    const call = ++shard.calls;
    const page = await this.options.streams.send(new GetRecordsCommand({ ShardIterator: shard.iterator, Limit: PAGE }), {
      abortSignal: this.abort.signal,
    });
    shard.failures = 0;
    const records = page.Records ?? [];
    if (records.length > 0) {
      shard.lastSeq = records.at(-1)?.dynamodb?.SequenceNumber;
      this.options.claims?.advanced(shard, records.length);
      try {
        this.options.onRecords(records);
      } catch (err) {
        // A consumer's failure must not make the poller read the same records forever.
        this.options.log?.error(`handling records of ${shard.id} failed`, err);
      }
    }
    if (records.length < PAGE) {
      shard.lastQuietCall = call;
      this.events.emit('quiet');
    }
    shard.iterator = page.NextShardIterator;
    return records.length;
  }

  private openIterator(shard: ShardReader) {
    return openIterator(this.options.streams, this.streamArn as string, shard, this.abort.signal);
  }

  /** Exponential back-off with full jitter, at least the shard's poll interval. */
  private backoff(failures: number) {
    return (
      this.minIntervalMs +
      delayFor({ firstMs: this.minIntervalMs, maxMs: this.maxBackoffMs - this.minIntervalMs, jitter: 'full' }, Math.min(failures, 10))
    );
  }

  /** Waits, or less if the poller stops meanwhile. */
  private sleep(ms: number) {
    if (ms <= 0 || this.stopped) return Promise.resolve();
    return sleep(ms, this.abort.signal);
  }
}

function describe(err: unknown) {
  const e = err as Error & { code?: string };
  return `${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
}
