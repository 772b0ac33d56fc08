/**
 * Writing output: text accepted at its stream's end is live at once (published to this
 * server's subscribers and, with replicas, the others') and stored in chunks, one conditional
 * put per stream per flush, at most every `flushMs` or `flushBytes`. What a crash of this
 * server can lose is the text accepted since its stream's last flush, and never text answered
 * as durable; a writer that did not hear "durable" sends that text again (to any server) and
 * it is taken once.
 *
 * A chunk is written at the offset where the stored text ends, conditioned on no chunk
 * starting there: another server that stored text there first (the same writer, reconnected)
 * is found and compared, never overwritten. Chunks are stored in turns between tenants
 * (output-puts.ts).
 */

import { fenceHolds } from '../domain/claim.ts';
import { ClaimLost, OffsetConflict, OutputBacklog, OutputStreamLimit, OutputTooLong } from '../domain/errors.ts';
import { codePoints, endOf, MAX_CHUNK_BYTES, type OutputChunk, type OutputStream, slicePoints, unitIndex } from '../domain/output.ts';
import type { RunClaim } from '../domain/run.ts';
import type { Logger } from '../lib/logger.ts';
import type { OutputStore } from '../store/outputs.ts';
import type { Change } from './changes.ts';
import { type OutputPuts, outputPuts } from './output-puts.ts';

export interface OutputWriterOptions {
  store: OutputStore;
  /** The run's claim as stored (a fenced write is checked against it). */
  claimOf: (tenant: string, runId: string) => Promise<RunClaim | null>;
  /** Calls `changed` when the run or its claim changes (the claim read is then read again); returns the unsubscribe. */
  watchRun: (tenant: string, runId: string, changed: () => void) => () => void;
  publish: (change: Change) => void;
  flushMs: number;
  flushBytes: number;
  /** A stream's length at most, in code points. */
  maxLength: number;
  log: Logger;
  now?: () => number;
  /** Streams held in memory at most (default 2,000); past it, with none idle, a new stream's write is refused, retryably. */
  maxStreams?: number;
  /** Text waiting to be stored across all streams at most (default 64 MiB); past it writes are refused, retryably. */
  maxWaitingBytes?: number;
  /** One tenant's share of the waiting text and of the streams held (default a quarter); past it its writes are refused, retryably. */
  tenantShare?: number;
  /** Output streams one run may have (RUNPLANE_MAX_OUTPUT_STREAMS); a new stream past it is refused. */
  maxStreamsPerRun: number;
  /** Chunks being stored, in turns between tenants (default: its own, 2 per tenant, 16 in all). */
  puts?: OutputPuts;
}

export interface AppendOutput {
  tenant: string;
  runId: string;
  stream: string;
  offset: number;
  text: string;
  final: boolean;
  /** Answer only once the text is stored. */
  durable?: boolean;
  fencingToken?: number;
}

export interface OutputAnswer {
  chunk: OutputChunk;
  /** The text is stored: a crash of this server cannot lose it. */
  durable: boolean;
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
/** Text kept after it is stored, to answer a writer's retry without a read. */
const TAIL_BYTES = 16 * 1024;
/** Text one stream may have waiting to be stored (DynamoDB not taking it) before writes are refused, retryably. */
const MAX_WAITING_BYTES = 1024 * 1024;
/** Between tries of a flush DynamoDB refused. */
const RETRY_MS = 200;
/** How long a claim read for a fenced write is trusted, unless the run changes first (the flush's fence is the real check). */
const CLAIM_TRUST_MS = 5_000;

interface Waiter {
  upTo: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One stream as this server knows it. */
interface StreamState {
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

export function createOutputWriter(options: OutputWriterOptions) {
  const { store, publish, flushMs, flushBytes, maxLength, log } = options;
  const maxStreams = options.maxStreams ?? MAX_STREAMS;
  const maxTotalWaiting = options.maxWaitingBytes ?? MAX_TOTAL_WAITING_BYTES;
  /** Bytes waiting across streams (kept as each stream's waitingBytes changes), in all and per tenant. */
  let totalWaiting = 0;
  const tenantWaiting = new Map<string, number>();
  const share = options.tenantShare ?? TENANT_SHARE;
  const tenantWaitingShare = Math.max(1, Math.floor(maxTotalWaiting * share));
  const tenantStreamShare = Math.max(1, Math.floor(maxStreams * share));
  const now = options.now ?? Date.now;
  const puts = options.puts ?? outputPuts();
  const streams = new Map<string, StreamState>();
  const loading = new Map<string, Promise<StreamState>>();
  /** Claims read for fenced writes, each dropped as soon as its run changes (a cancel, a takeover). */
  const claims = new Map<string, { claim: RunClaim | null; readAt: number; unwatch: () => void }>();
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
      if (isNew && streamsOf(tenant, runId, stored) >= options.maxStreamsPerRun)
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
  function streamsOf(tenant: string, runId: string, stored: string[]) {
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

  function forgetClaim(key: string) {
    claims.get(key)?.unwatch();
    claims.delete(key);
  }

  async function checkFence(tenant: string, runId: string, token: number) {
    const key = `${tenant}\u0000${runId}`;
    let known = claims.get(key);
    if (!known || now() - known.readAt > CLAIM_TRUST_MS || !fenceHolds(known.claim, token, now())) {
      known?.unwatch();
      claims.delete(key);
      // Watched before the read: a change landing meanwhile drops what is read.
      let changed = false;
      const unwatch = options.watchRun(tenant, runId, () => {
        changed = true;
        forgetClaim(key);
      });
      let claim: Awaited<ReturnType<typeof options.claimOf>>;
      try {
        claim = await options.claimOf(tenant, runId);
      } catch (err) {
        unwatch();
        throw err;
      }
      known = { claim, readAt: now(), unwatch };
      if (changed) unwatch();
      else {
        forgetClaim(key);
        claims.set(key, known);
        if (claims.size > maxStreams) forgetClaim(claims.keys().next().value as string);
      }
    }
    if (!fenceHolds(known.claim, token, now())) throw new ClaimLost(runId, known.claim, now());
  }

  /** The stream's text from `from` to `to` as this server has it, or undefined when it would need a read. */
  function textAt(state: StreamState, from: number, to: number): string | undefined {
    if (from < state.tailStart || to > state.length) return undefined;
    return slicePoints(state.tail + state.waiting, from - state.tailStart, to - state.tailStart);
  }

  /** Whether the text at [offset, offset + text) is `text` already (a retry). */
  async function alreadyThere(state: StreamState, offset: number, text: string, end: number) {
    const held = textAt(state, offset, end);
    if (held !== undefined) return held === text;
    const stored = await store.read(state.tenant, state.runId, state.stream, offset, {
      maxBytes: Buffer.byteLength(text) + MAX_CHUNK_BYTES,
    });
    return stored.text.length >= text.length && stored.text.startsWith(text) && codePoints(stored.text) >= end - offset;
  }

  function keepTail(state: StreamState, stored: string) {
    state.tail += stored;
    if (state.tail.length > TAIL_BYTES) {
      // Cut at a code point, so tailStart stays a code-point offset.
      const cut = unitIndex(state.tail, codePoints(state.tail.slice(0, state.tail.length - TAIL_BYTES)));
      state.tailStart += codePoints(state.tail.slice(0, cut));
      state.tail = state.tail.slice(cut);
    }
  }

  function settle(state: StreamState) {
    const left: Waiter[] = [];
    const done = (waiter: Waiter) => waiter.upTo <= state.durable && (!state.final || state.finalStored || waiter.upTo < state.length);
    for (const waiter of state.waiters) (done(waiter) ? waiter.resolve : () => left.push(waiter))();
    state.waiters = left;
  }

  function setWaitingBytes(state: StreamState, bytes: number) {
    const change = bytes - state.waitingBytes;
    totalWaiting += change;
    const tenant = (tenantWaiting.get(state.tenant) ?? 0) + change;
    if (tenant > 0) tenantWaiting.set(state.tenant, tenant);
    else tenantWaiting.delete(state.tenant);
    state.waitingBytes = bytes;
  }

  /** Drops the waiting text: the writer is told why at its next write, and anyone waiting for it now. */
  function drop(state: StreamState, error: Error) {
    state.refused = { token: state.token, error };
    state.waiting = '';
    setWaitingBytes(state, 0);
    state.length = state.durable;
    state.final = state.finalStored;
    for (const waiter of state.waiters) waiter.reject(error);
    state.waiters = [];
  }

  function schedule(state: StreamState, delayMs: number) {
    if (state.timer) return;
    state.timer = setTimeout(() => {
      state.timer = undefined;
      void flush(state);
    }, delayMs);
    state.timer.unref();
  }

  /** A flush's table call failed: a lost claim drops the waiting text, anything else is tried again shortly. */
  function failed(state: StreamState, err: unknown) {
    if (err instanceof ClaimLost) return drop(state, err);
    log.warn(`storing output of run ${state.runId} failed (tried again in ${RETRY_MS} ms): ${(err as Error).message}`);
    schedule(state, RETRY_MS);
  }

  /**
   * Stores the waiting text, a chunk at a time; one flush of a stream at a time. It never
   * rejects (timers and writes that do not wait start it with nobody to hear a failure): a
   * failure is logged and the text waits for the next try.
   */
  function flush(state: StreamState): Promise<void> {
    if (state.flushing) return state.flushing;
    if (state.timer) {
      clearTimeout(state.timer);
      state.timer = undefined;
    }
    state.flushing = (async () => {
      // What waits now goes; text accepted while this flush is out goes with the next one.
      let due = state.waiting.length;
      const finalDue = state.final;
      // An empty final chunk closes a stream whose text is all stored already.
      while (due > 0 || (finalDue && !state.finalStored)) {
        // Whole code points, at most a chunk row's worth of bytes.
        let cut = due;
        while (Buffer.byteLength(state.waiting.slice(0, cut)) > MAX_CHUNK_BYTES)
          cut = unitIndex(state.waiting, Math.floor(codePoints(state.waiting.slice(0, cut)) / 2));
        const text = state.waiting.slice(0, cut);
        const last = cut === state.waiting.length && finalDue;
        const chunk: OutputChunk = { runId: state.runId, stream: state.stream, offset: state.durable, text, final: last };
        let stored: boolean;
        try {
          stored = await puts.put(state.tenant, () => store.put(state.tenant, chunk, state.token));
        } catch (err) {
          return failed(state, err);
        }
        const before = state.waiting.length;
        if (stored) {
          advance(state, text);
          if (chunk.final) state.finalStored = true;
        } else {
          // The reads that compare the chunk there with ours fail like the put can (DynamoDB gone a while).
          let goOn: boolean;
          try {
            goOn = await reconcile(state);
          } catch (err) {
            return failed(state, err);
          }
          if (!goOn) return;
        }
        due -= before - state.waiting.length;
      }
      settle(state);
    })()
      .catch((err) => {
        log.error(`storing output of run ${state.runId} failed (tried again in ${RETRY_MS} ms)`, err);
        schedule(state, RETRY_MS);
      })
      .finally(() => {
        state.flushing = undefined;
        settle(state);
        // Text that came while a flush was in flight goes with the next one.
        if ((state.waiting || (state.final && !state.finalStored)) && !state.timer)
          schedule(state, state.waitingBytes >= flushBytes || state.waiters.length > 0 ? 0 : flushMs);
      });
    return state.flushing;
  }

  function advance(state: StreamState, text: string) {
    state.durable += codePoints(text);
    state.waiting = state.waiting.slice(text.length);
    setWaitingBytes(state, Buffer.byteLength(state.waiting));
    keepTail(state, text);
  }

  /**
   * Another chunk starts where this server's stored text ends (the writer sent the same text to
   * another server too): the same text moves on past it; other text drops ours.
   * @returns whether flushing may go on
   */
  async function reconcile(state: StreamState): Promise<boolean> {
    const theirs = await store.chunkAt(state.tenant, state.runId, state.stream, state.durable);
    if (!theirs) return true;
    const ours = state.waiting;
    if (ours.startsWith(theirs.text) && (!theirs.final || ours === theirs.text)) {
      advance(state, theirs.text);
      if (theirs.final) state.final = state.finalStored = true;
      return true;
    }
    if (theirs.text.startsWith(ours)) {
      // Theirs holds all that waits here and more: the stream is as long as theirs.
      advance(state, ours);
      keepTail(state, theirs.text.slice(ours.length));
      state.durable = state.length = endOf(theirs);
      state.final = state.finalStored = theirs.final;
      return true;
    }
    const found = await store.storedEnd(state.tenant, state.runId, state.stream);
    state.durable = found.length;
    state.tail = '';
    state.tailStart = found.length;
    drop(state, new OffsetConflict(state.runId, state.stream, found.length, 'taken', theirs.offset));
    log.warn(
      `output stream ${state.stream} of run ${state.runId}: other text was stored at ${theirs.offset}; what waited here was dropped`,
    );
    return false;
  }

  return {
    /**
     * Appends `text` at `offset` (the stream's length), or answers a retry of text already there.
     * @throws OffsetConflict, RunNotFound, ClaimLost, OutputTooLong, OutputBacklog
     */
    async append(input: AppendOutput): Promise<OutputAnswer> {
      const state = await load(input.tenant, input.runId, input.stream);
      const points = codePoints(input.text);
      const end = input.offset + points;
      const chunk: OutputChunk = { runId: input.runId, stream: input.stream, offset: input.offset, text: input.text, final: input.final };
      if (state.refused && state.refused.token === input.fencingToken && input.offset > state.length) {
        // The writer goes on from text this server dropped: it hears why, once.
        const { error } = state.refused;
        state.refused = undefined;
        throw error;
      }
      if (input.offset < state.length || (input.offset === state.length && points === 0 && state.final && input.final)) {
        // A retry: the same text at the same place (and final only if the stream is).
        if (
          end <= state.length &&
          (!input.final || (state.final && end === state.length)) &&
          (await alreadyThere(state, input.offset, input.text, end))
        ) {
          if (input.durable && end > state.durable) await durableUpTo(state, end);
          return { chunk, durable: end <= state.durable };
        }
        throw new OffsetConflict(input.runId, input.stream, state.length, state.final ? 'final' : 'taken', input.offset);
      }
      if (input.offset > state.length) throw new OffsetConflict(input.runId, input.stream, state.length, 'gap', input.offset);
      if (state.final) throw new OffsetConflict(input.runId, input.stream, state.length, 'final', input.offset);
      if (end > maxLength) throw new OutputTooLong(input.stream, maxLength);
      if (input.fencingToken !== undefined) await checkFence(input.tenant, input.runId, input.fencingToken);
      // A chunk carries one token: text under another one waits for what came before to be stored.
      if (state.waiting && state.token !== input.fencingToken) await flush(state);
      if (state.waitingBytes > MAX_WAITING_BYTES) throw new OutputBacklog(input.stream, 'stream');
      if ((tenantWaiting.get(input.tenant) ?? 0) > tenantWaitingShare) throw new OutputBacklog(input.stream, 'tenant');
      if (totalWaiting > maxTotalWaiting) throw new OutputBacklog(input.stream, 'server');
      // Checked again: the stream may have moved while this write waited.
      if (input.offset !== state.length || state.final)
        throw new OffsetConflict(input.runId, input.stream, state.length, state.final ? 'final' : 'taken', input.offset);
      state.waiting += input.text;
      setWaitingBytes(state, state.waitingBytes + Buffer.byteLength(input.text));
      state.token = input.fencingToken;
      state.length = end;
      state.final = input.final;
      state.refused = undefined;
      publish({ kind: 'output', tenant: input.tenant, runId: input.runId, chunk });
      if (input.final || input.durable || state.waitingBytes >= flushBytes) {
        const flushed = flush(state);
        if (input.durable || input.final) await durableUpTo(state, end);
        else void flushed;
      } else schedule(state, flushMs);
      return { chunk, durable: end <= state.durable && (!input.final || state.finalStored) };
    },

    /** The text accepted here past what is stored, for a subscriber joining (it has no gap to wait out). */
    waitingOf(tenant: string, runId: string, stream: string): OutputChunk | undefined {
      const state = streams.get(keyOf(tenant, runId, stream));
      if (!state?.waiting) return undefined;
      return { runId, stream, offset: state.durable, text: state.waiting, final: state.final };
    },

    /** The streams of a run this server has accepted text for, with their lengths (some may not be stored yet). */
    streamsOf(tenant: string, runId: string): OutputStream[] {
      const found: OutputStream[] = [];
      for (const state of streams.values())
        if (state.tenant === tenant && state.runId === runId && state.length > 0)
          found.push({ stream: state.stream, length: state.length, final: state.final });
      return found;
    },

    /** Stores everything waiting (a graceful stop: every stream at once, not in turns). */
    async flushAll() {
      puts.unbound();
      await Promise.all([...streams.values()].filter((s) => s.waiting).map((s) => flush(s)));
    },

    /** For tests and /metrics: streams held, and text waiting to be stored. */
    stats() {
      return { streams: streams.size, waitingBytes: totalWaiting };
    },

    /** For tests and /metrics: text one tenant has waiting to be stored. */
    waitingOfTenant: (tenant: string) => tenantWaiting.get(tenant) ?? 0,
  };

  function durableUpTo(state: StreamState, end: number) {
    if (end <= state.durable && (!state.final || state.finalStored)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      state.waiters.push({ upTo: end, resolve, reject });
      void flush(state);
    });
  }
}

export type OutputWriter = ReturnType<typeof createOutputWriter>;
