/**
 * Storing a stream's waiting text: one flush of a stream at a time, a chunk at a time, each a
 * put at the offset where the stored text ends, conditioned on no chunk starting there. A chunk
 * found there (another server stored the writer's text first) is compared, never overwritten:
 * the same text moves on past it, other text drops ours. Writers waiting for their text to be
 * stored are answered as it is.
 */
import { ClaimLost, OffsetConflict } from '../../domain/errors.ts';
import { codePoints, endOf, MAX_CHUNK_BYTES, type OutputChunk, unitIndex } from '../../domain/output.ts';
import type { Logger } from '../../lib/logger.ts';
import type { OutputStore } from './chunks.ts';
import type { HeldStreams, StreamState, Waiter } from './held-streams.ts';
import type { OutputPuts } from './puts.ts';

export interface FlushOptions {
  store: Pick<OutputStore, 'put' | 'chunkAt' | 'storedEnd'>;
  held: Pick<HeldStreams, 'setWaitingBytes'>;
  flushMs: number;
  flushBytes: number;
  log: Logger;
  /** Chunks stored in turns between tenants (puts.ts). */
  puts: OutputPuts;
}

/** Text kept after it is stored, to answer a writer's retry without a read. */
const TAIL_BYTES = 16 * 1024;
/** Between tries of a flush DynamoDB refused. */
const RETRY_MS = 200;

export function flushes({ store, held, flushMs, flushBytes, log, puts }: FlushOptions) {
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

  /** Drops the waiting text: the writer is told why at its next write, and anyone waiting for it now. */
  function drop(state: StreamState, error: Error) {
    state.refused = { token: state.token, error };
    state.waiting = '';
    held.setWaitingBytes(state, 0);
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
    held.setWaitingBytes(state, Buffer.byteLength(state.waiting));
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
    flush,
    /** Flushes the stream after `delayMs`, unless a flush is already set to come. */
    schedule,
    /** Resolves once the text up to `end` is stored (and the stream's end, if it is final); rejects if it is dropped. */
    durableUpTo(state: StreamState, end: number) {
      if (end <= state.durable && (!state.final || state.finalStored)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        state.waiters.push({ upTo: end, resolve, reject });
        void flush(state);
      });
    },
  };
}
