/** Live output: appendOutput, runOutput, Run.outputs and Run.output. */
import { z } from 'zod';
import { ClaimLost, OffsetConflict, RunNotFound } from '../domain/errors.ts';
import { MAX_INT } from '../domain/limits.ts';
import { isWellFormed, type OutputChunk, type OutputStream } from '../domain/output.ts';
import { MAX_OUTPUT_READ_PAGES } from '../store/outputs/chunks.ts';
import { builder, invalidInput } from './builder.ts';
import { ErrorInterface } from './errors.ts';
import { amount, eventType, fencingToken, fencingTokenDescription, id } from './inputs.ts';
import { plainRead } from './plain-read.ts';
import { RunRef } from './run.ts';
import { tableReads } from './table-reads.ts';

const OFFSET_UNIT = 'code points (Unicode characters: what Python’s len() counts, [...text].length in JavaScript)';

type ChunkParent = OutputChunk & { durable?: boolean };

export const OutputChunkRef = builder.objectRef<ChunkParent>('OutputChunk').implement({
  description: `Text of a run's output stream, from \`offset\` (in ${OFFSET_UNIT}) on.`,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    stream: t.exposeString('stream'),
    offset: t.exposeInt('offset', { description: `Where the text starts in the stream, in ${OFFSET_UNIT}.` }),
    text: t.exposeString('text'),
    final: t.exposeBoolean('final', {
      description: 'The stream ends with this text: nothing more comes, and nothing more can be written.',
    }),
    durable: t.boolean({
      nullable: true,
      description:
        'appendOutput: whether the text is stored already (a crash of the server cannot lose it; ask with `durable: true` to wait for it). Null elsewhere.',
      resolve: (chunk) => chunk.durable ?? null,
      extensions: plainRead,
    }),
  }),
});

const OutputStreamRef = builder.objectRef<OutputStream>('OutputStream').implement({
  description: 'One output stream of a run.',
  fields: (t) => ({
    stream: t.exposeString('stream'),
    length: t.exposeInt('length', { description: `Its length, in ${OFFSET_UNIT}: the offset of the next write.` }),
    final: t.exposeBoolean('final'),
  }),
});

builder.objectType(OffsetConflict, {
  name: 'OffsetConflict',
  description:
    'The offset does not continue the stream: other text is there, it would leave a gap, or the stream is final. Nothing was written. Write at `length`.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof OffsetConflict,
  fields: (t) => ({ length: t.exposeInt('length', { description: `The stream's length now, in ${OFFSET_UNIT}.` }) }),
});

const text = z.string().refine(isWellFormed, 'must be well-formed Unicode (no lone surrogate)');

const AppendOutputInput = builder.inputType('AppendOutputInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    stream: t.string({ required: true, description: 'The stream\'s name, like an event type: "llm", "stdout", "tool/search".' }),
    offset: t.int({ required: true, description: `The stream's length before this text, in ${OFFSET_UNIT}.` }),
    text: t.string({ required: true, description: 'The text to append (empty only to close the stream with `final`).' }),
    final: t.boolean({ description: 'Close the stream after this text (default false).' }),
    durable: t.boolean({
      description: 'Answer only once the text is stored (default false: live at once, stored within RUNPLANE_OUTPUT_FLUSH_MS).',
    }),
    fencingToken: t.int({ description: fencingTokenDescription }),
  }),
  validate: z
    .object({
      runId: id,
      stream: eventType,
      offset: amount,
      text,
      final: z.boolean().optional().nullable(),
      durable: z.boolean().optional().nullable(),
      fencingToken: fencingToken.optional().nullable(),
    })
    .refine((input) => input.text !== '' || input.final === true, { message: 'must not be empty unless final is true', path: ['text'] }),
});

builder.mutationField('appendOutput', (t) =>
  t.field({
    type: OutputChunkRef,
    description: `Appends text to one of the run's output streams at \`offset\` (its length, in ${OFFSET_UNIT}): live to subscribers at once, stored in chunks at most every RUNPLANE_OUTPUT_FLUSH_MS. The same text at the same offset again (a retry) is answered the same and written once; other text there gets OffsetConflict.`,
    errors: { types: [OffsetConflict, RunNotFound, ClaimLost] },
    args: { input: t.arg({ type: AppendOutputInput, required: true }) },
    resolve: async (_, { input }, { tenant, output }) => {
      const { chunk, durable } = await output.append({
        tenant,
        runId: input.runId,
        stream: input.stream,
        offset: input.offset,
        text: input.text,
        final: input.final ?? false,
        durable: input.durable ?? false,
        fencingToken: input.fencingToken ?? undefined,
      });
      return { ...chunk, durable };
    },
  }),
);

/** Arguments validated once, at subscribe (see subscriptions.ts). */
const runOutputArgs = z.object({ runId: id, stream: eventType, afterOffset: amount.nullish() });

builder.subscriptionField('runOutput', (t) =>
  t.field({
    type: OutputChunkRef,
    description: `A run's output stream from \`afterOffset\` (default 0: all of it), in ${OFFSET_UNIT}: the stored text, then live text as it is written, joined without a gap or an overlap. A slow reader gets fewer, larger chunks. Completes after the stream's final text; an afterOffset past the end of a final stream is refused. Over SSE each chunk's id is the offset after it: Last-Event-ID resumes there.`,
    args: {
      runId: t.arg.id({ required: true }),
      stream: t.arg.string({ required: true }),
      afterOffset: t.arg.int(),
    },
    subscribe: async (_, args, { tenant, stores, live, connection, reads }) => {
      const parsed = runOutputArgs.safeParse(args);
      if (!parsed.success) throw invalidInput(parsed.error.issues);
      const { runId, stream, afterOffset } = parsed.data;
      await stores.outputs.ensureRun(tenant, runId, reads);
      const resumed = /^(0|[1-9][0-9]{0,9})$/.test(connection.lastEventId ?? '') ? Number(connection.lastEventId) : undefined;
      const from = resumed !== undefined && resumed <= MAX_INT ? resumed : (afterOffset ?? 0);
      if (from > 0) {
        // Past the end of a final stream nothing will ever come: refused, not left open.
        const end = await stores.outputs.storedEnd(tenant, runId, stream, reads);
        if (end.final && from > end.length) {
          const field = resumed !== undefined && from === resumed ? 'Last-Event-ID' : 'afterOffset';
          throw invalidInput([
            { path: [field], message: `must be at most ${end.length}: the stream is final at ${end.length} code points` },
          ]);
        }
      }
      return live.runOutput({ tenant, runId, stream, afterOffset: from, sendBuffer: connection.sendBuffer });
    },
    resolve: (chunk: OutputChunk) => chunk,
    // The run's row and the stream's end, at setup.
    extensions: { ...plainRead, ...tableReads(2) },
  }),
);

builder.objectField(RunRef, 'outputs', (t) =>
  t.field({
    type: [OutputStreamRef],
    description:
      "The run's output streams (the first RUNPLANE_MAX_OUTPUT_STREAMS by name: a run has at most that many), with their length (what was accepted, stored or not) and whether they are final.",
    // Their rows, then the end of each stream not final.
    extensions: tableReads((limits) => 1 + limits.maxOutputStreams),
    resolve: async (p, _, { tenant, stores, output, limits, reads }) => {
      const listed = await stores.outputs.list(tenant, p.run.id, { most: limits.maxOutputStreams, reads });
      // What this server has accepted, stored or not: longer than what is stored, or not stored at all yet.
      const accepted = new Map(output.streamsOf(tenant, p.run.id).map((s) => [s.stream, s]));
      const merged = listed.map((stream) => {
        const here = accepted.get(stream.stream);
        accepted.delete(stream.stream);
        return here && here.length > stream.length ? { ...stream, ...here } : stream;
      });
      if (accepted.size === 0) return merged;
      return [...merged, ...accepted.values()].sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));
    },
  }),
);

builder.objectField(RunRef, 'output', (t) =>
  t.field({
    type: OutputChunkRef,
    nullable: true,
    description: `The stored text of one output stream from \`afterOffset\` (default 0), one page (at most about 1 MB, less when the text is in many small chunks: read on from offset + its length while the stream is not final). Null for a stream with no text stored.`,
    // The chunk holding the offset, the pages read from it, and the stream's end.
    extensions: tableReads(1 + MAX_OUTPUT_READ_PAGES + 1),
    args: { stream: t.arg.string({ required: true }), afterOffset: t.arg.int() },
    resolve: async (p, args, { tenant, stores, response, reads }) => {
      const parsed = z.object({ stream: eventType, afterOffset: amount.nullish() }).safeParse(args);
      if (!parsed.success) throw invalidInput(parsed.error.issues);
      const { stream, afterOffset } = parsed.data;
      const stored = await stores.outputs.read(tenant, p.run.id, stream, afterOffset ?? 0, { responseLimit: response, reads });
      if (!stored.text && !stored.final && (await stores.outputs.storedEnd(tenant, p.run.id, stream, reads)).length === 0) return null;
      return { runId: stored.runId, stream: stored.stream, offset: stored.offset, text: stored.text, final: stored.final };
    },
  }),
);
