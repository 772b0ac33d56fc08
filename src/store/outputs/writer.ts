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
 * is found and compared, never overwritten.
 */

import type { Change } from '../../domain/change.ts';
import { OffsetConflict, OutputTooLong } from '../../domain/errors.ts';
import { codePoints, MAX_CHUNK_BYTES, type OutputChunk, slicePoints } from '../../domain/output.ts';
import type { Logger } from '../../lib/logger.ts';
import type { OutputStore } from './chunks.ts';
import { type FenceCheckOptions, fenceChecks } from './fence-checks.ts';
import { flushes } from './flushes.ts';
import { type HeldStreamsOptions, holdStreams, type StreamState } from './held-streams.ts';
import { type OutputPuts, outputPuts } from './puts.ts';

/** Its bounds (streams held, text waiting, a tenant's share, streams per run) are those of held-streams.ts. */
export interface OutputWriterOptions extends Omit<HeldStreamsOptions, 'store' | 'now'>, Pick<FenceCheckOptions, 'claimOf' | 'watchRun'> {
  store: OutputStore;
  publish: (change: Change) => void;
  flushMs: number;
  flushBytes: number;
  /** A stream's length at most, in code points. */
  maxLength: number;
  log: Logger;
  now?: () => number;
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

export function createOutputWriter(options: OutputWriterOptions) {
  const { store, publish, flushMs, flushBytes, maxLength, log } = options;
  const now = options.now ?? Date.now;
  const held = holdStreams({ ...options, now });
  const checkFence = fenceChecks({ claimOf: options.claimOf, watchRun: options.watchRun, now, most: held.maxStreams });
  const puts = options.puts ?? outputPuts();
  const { flush, schedule, durableUpTo } = flushes({ store, held, flushMs, flushBytes, log, puts });

  /** The stream's text from `from` to `to` as this server has it, or undefined when it would need a read. */
  function textAt(state: StreamState, from: number, to: number): string | undefined {
    if (from < state.tailStart || to > state.length) return undefined;
    return slicePoints(state.tail + state.waiting, from - state.tailStart, to - state.tailStart);
  }

  /** Whether the text at [offset, offset + text) is `text` already (a retry). */
  async function alreadyThere(state: StreamState, offset: number, text: string, end: number) {
    const known = textAt(state, offset, end);
    if (known !== undefined) return known === text;
    const stored = await store.read(state.tenant, state.runId, state.stream, offset, {
      maxBytes: Buffer.byteLength(text) + MAX_CHUNK_BYTES,
    });
    return stored.text.length >= text.length && stored.text.startsWith(text) && codePoints(stored.text) >= end - offset;
  }

  return {
    /**
     * Appends `text` at `offset` (the stream's length), or answers a retry of text already there.
     * @throws OffsetConflict, RunNotFound, ClaimLost, OutputTooLong, OutputBacklog
     */
    async append(input: AppendOutput): Promise<OutputAnswer> {
      const state = await held.load(input.tenant, input.runId, input.stream);
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
      held.refuseBacklog(state);
      // Checked again: the stream may have moved while this write waited.
      if (input.offset !== state.length || state.final)
        throw new OffsetConflict(input.runId, input.stream, state.length, state.final ? 'final' : 'taken', input.offset);
      state.waiting += input.text;
      held.setWaitingBytes(state, state.waitingBytes + Buffer.byteLength(input.text));
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
    waitingOf: held.waitingOf,

    /** The streams of a run this server has accepted text for, with their lengths (some may not be stored yet). */
    streamsOf: held.ofRun,

    /** Stores everything waiting (a graceful stop: every stream at once, not in turns). */
    async flushAll() {
      puts.unbound();
      await Promise.all(held.withTextWaiting().map((s) => flush(s)));
    },

    /** For tests and /metrics: streams held, and text waiting to be stored. */
    stats: held.stats,

    /** For tests and /metrics: text one tenant has waiting to be stored. */
    waitingOfTenant: held.waitingOfTenant,
  };
}

export type OutputWriter = ReturnType<typeof createOutputWriter>;
