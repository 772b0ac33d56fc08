/**
 * The output streams one server holds in memory, and what they may hold: so many streams (an
 * idle one with nothing waiting is forgotten first, and read again when written), so much text
 * waiting to be stored per stream, per tenant and in all. Past a bound a write is refused,
 * retryably (OutputBacklog), and the text already accepted is stored meanwhile.
 */
import { OutputBacklog, OutputStreamLimit } from '../../domain/errors.ts';
import type { OutputChunk, OutputStream } from '../../domain/output.ts';
import type { OutputStore } from './chunks.ts';

/** A writer waiting for its text to be stored (a durable or final write). */
export interface Waiter {
  upTo: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One stream as this server knows it. */
export interface StreamState {
  tenant: string;
  runId: string;
  stream: string;
  /** Where the stored text ends. */
  durable: number;
  /** Text accepted past `durable`, waiting to be stored. */
  waiting: string;
  waitingBytes: number;
  /** The claim token the waiting text was written with (a chunk is fenced by one token). */
  token?: number;
  /** Where the accepted text ends (durable + the waiting text's code points). */
  length: number;
  final: boolean;
  /** The stream's end is stored (its last chunk says final). */
  finalStored: boolean;
  /** The last stored text, from `tailStart`: a retry of it is answered without a read. */
  tail: string;
  tailStart: number;
  timer?: NodeJS.Timeout;
  flushing?: Promise<void>;
  waiters: Waiter[];
  /** Why the waiting text was dropped, for the writer's next write with the same token. */
  refused?: { token: number | undefined; error: Error };
  usedAt: number;
  /** This server created the stream (nothing was stored of it when it was loaded). */
  createdHere: boolean;
}

export interface HeldStreamsOptions {
  store: Pick<OutputStore, 'ensureRun' | 'storedEnd' | 'streamNames'>;
  now: () => number;
  /** Streams held in memory at most (default 2,000); past it, with none idle, a new stream's write is refused, retryably. */
  maxStreams?: number;
  /** Text waiting to be stored across all streams at most (default 64 MiB); past it writes are refused, retryably. */
  maxWaitingBytes?: number;
  /** One tenant's share of the waiting text and of the streams held (default a quarter); past it its writes are refused, retryably. */
  tenantShare?: number;
  /** Output streams one run may have (RUNPLANE_MAX_OUTPUT_STREAMS); a new stream past it is refused. */
  maxStreamsPerRun: number;
}

/** Streams kept in memory at most (an idle one with nothing waiting is forgotten first, and read again when written). */
const MAX_STREAMS = 2_000;
/** Text waiting to be stored, all streams together. */
const MAX_TOTAL_WAITING_BYTES = 64 * 1024 * 1024;
/**
 * One tenant's share of the text waiting to be stored, and of the streams held with text on its
 * way: a quarter. A tenant past its share is refused (retryably) while the others still write;
 * all of it is taken only by four tenants at their share at once.
 */
const TENANT_SHARE = 1 / 4;
/** Text one stream may have waiting to be stored (DynamoDB not taking it) before writes are refused, retryably. */
const MAX_WAITING_BYTES = 1024 * 1024;

export function holdStreams(options: HeldStreamsOptions) {
  const { store, now } = options;
  const maxStreams = options.maxStreams ?? MAX_STREAMS;
  const maxTotalWaiting = options.maxWaitingBytes ?? MAX_TOTAL_WAITING_BYTES;
  /** Bytes waiting across streams (kept as each stream's waitingBytes changes), in all and per tenant. */
  let totalWaiting = 0;
  const tenantWaiting = new Map<string, number>();
  const share = options.tenantShare ?? TENANT_SHARE;
  const tenantWaitingShare = Math.max(1, Math.floor(maxTotalWaiting * share));
  const tenantStreamShare = Math.max(1, Math.floor(maxStreams * share));
  const streams = new Map<string, StreamState>();
  const loading = new Map<string, Promise<StreamState>>();
  const keyOf = (tenant: string, runId: string, stream: string) => `${tenant}\u0000${runId}\u0000${stream}`;

  async function load(tenant: string, runId: string, stream: string): Promise<StreamState> {
    const key = keyOf(tenant, runId, stream);
    const known = streams.get(key);
    if (known) {
      known.usedAt = now();
      return known;
    }
    const pending = loading.get(key);
    if (pending) return pending;
    const loaded = (async () => {
      await store.ensureRun(tenant, runId);
      const end = await store.storedEnd(tenant, runId, stream);
      // A stream not stored yet is a new one: the run may have only so many.
      const isNew = end.length === 0 && !end.final;
      const stored = isNew ? await store.streamNames(tenant, runId, options.maxStreamsPerRun) : [];
      const state: StreamState = {
        tenant,
        runId,
        stream,
        durable: end.length,
        waiting: '',
        waitingBytes: 0,
        length: end.length,
        final: end.final,
        finalStored: end.final,
        tail: '',
        tailStart: end.length,
        waiters: [],
        usedAt: now(),
        createdHere: isNew,
      };
      if (isNew && streamCount(tenant, runId, stored) >= options.maxStreamsPerRun)
        throw new OutputStreamLimit(stream, options.maxStreamsPerRun);
      forgetIdle();
      // Every stream held has text on its way to the table: this one waits its turn.
      if (streams.size >= maxStreams) throw new OutputBacklog(stream);
      // A tenant may keep a share of them busy, so that another's new stream still finds room.
      if (busyStreamsOf(tenant) >= tenantStreamShare) throw new OutputBacklog(stream, 'tenant');
      streams.set(key, state);
      return state;
    })().finally(() => loading.delete(key));
    loading.set(key, loaded);
    return loaded;
  }

  /** The tenant's streams held here that cannot be forgotten now (text waiting, a flush out, a writer waiting). */
  function busyStreamsOf(tenant: string) {
    let count = 0;
    for (const state of streams.values())
      if (state.tenant === tenant && (state.waiting || state.flushing || state.waiters.length > 0)) count++;
    return count;
  }

  /**
   * The run's streams: those `stored` (read from the table) and those this server created, by
   * name. A stream created here may be stored by now or not (its first flush may land while the
   * names are read): counted once either way, so streams created at once cannot pass the limit.
   */
  function streamCount(tenant: string, runId: string, stored: string[]) {
    const names = new Set(stored);
    for (const state of streams.values())
      if (state.createdHere && state.tenant === tenant && state.runId === runId) names.add(state.stream);
    return names.size;
  }

  /** Keeps the map bounded: streams with nothing waiting, least recently used first. */
  function forgetIdle() {
    if (streams.size < maxStreams) return;
    const idle = [...streams.entries()].filter(([, s]) => !s.waiting && !s.flushing && s.waiters.length === 0);
    idle.sort((a, b) => a[1].usedAt - b[1].usedAt);
    for (const [key] of idle.slice(0, Math.max(1, streams.size - maxStreams + 1))) streams.delete(key);
  }

  return {
    maxStreams,
    /** The stream as this server holds it, read from the table first if it holds it not. @throws RunNotFound, OutputStreamLimit, OutputBacklog */
    load,

    /** Sets what the stream has waiting to be stored, kept in the totals of its tenant and of the server. */
    setWaitingBytes(state: StreamState, bytes: number) {
      const change = bytes - state.waitingBytes;
      totalWaiting += change;
      const tenant = (tenantWaiting.get(state.tenant) ?? 0) + change;
      if (tenant > 0) tenantWaiting.set(state.tenant, tenant);
      else tenantWaiting.delete(state.tenant);
      state.waitingBytes = bytes;
    },

    /** @throws OutputBacklog when the stream, its tenant past its share, or the server has too much text waiting to be stored */
    refuseBacklog(state: StreamState) {
      if (state.waitingBytes > MAX_WAITING_BYTES) throw new OutputBacklog(state.stream, 'stream');
      if ((tenantWaiting.get(state.tenant) ?? 0) > tenantWaitingShare) throw new OutputBacklog(state.stream, 'tenant');
      if (totalWaiting > maxTotalWaiting) throw new OutputBacklog(state.stream, 'server');
    },

    /** The text accepted here past what is stored, for a subscriber joining (it has no gap to wait out). */
    waitingOf(tenant: string, runId: string, stream: string): OutputChunk | undefined {
      const state = streams.get(keyOf(tenant, runId, stream));
      if (!state?.waiting) return undefined;
      return { runId, stream, offset: state.durable, text: state.waiting, final: state.final };
    },

    /** The streams of a run this server has accepted text for, with their lengths (some may not be stored yet). */
    ofRun(tenant: string, runId: string): OutputStream[] {
      const found: OutputStream[] = [];
      for (const state of streams.values())
        if (state.tenant === tenant && state.runId === runId && state.length > 0)
          found.push({ stream: state.stream, length: state.length, final: state.final });
      return found;
    },

    /** Every stream held with text waiting to be stored. */
    withTextWaiting: () => [...streams.values()].filter((s) => s.waiting),

    stats: () => ({ streams: streams.size, waitingBytes: totalWaiting }),

    waitingOfTenant: (tenant: string) => tenantWaiting.get(tenant) ?? 0,
  };
}

export type HeldStreams = ReturnType<typeof holdStreams>;
