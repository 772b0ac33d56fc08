/**
 * One subscriber's view of an output stream: from `afterOffset`, the stored text from the
 * table, then live text as it is accepted (here, or on another replica through Redis), joined
 * at the offset where the one ends, without a gap or an overlap. Live text that comes ahead of
 * what the subscriber has (it joined while text waited to be stored elsewhere, a live copy was
 * lost) waits, and the table is read again until the gap is stored.
 *
 * What waits for the subscriber is one text, however many writes made it: a slow reader gets
 * fewer, larger chunks. It holds its bytes in the connection's send buffer; when that is full
 * the feed stops taking live text and, once the reader drains, reads on from the table.
 */
import { codePoints, endOf, type OutputChunk, slicePoints } from '../domain/output.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import { topics } from './changes.ts';
import type { FeedTable } from './feed-table.ts';
import type { Hub } from './hub.ts';
import { Pullable } from './pullable.ts';

export interface OutputFeedOptions {
  hub: Hub;
  /** The table as this feed reads it (within its connection's and its tenant's reads). */
  table: Pick<FeedTable, 'output'>;
  tenant: string;
  runId: string;
  stream: string;
  afterOffset: number;
  /** The connection's send buffer, the one `table` reads within. */
  sendBuffer: SendBuffer;
  /** Text accepted on this server that is not stored yet (a subscriber joining need not wait for it). */
  waiting?: () => OutputChunk | undefined;
  /** How long live text ahead of the reader waits before the table is read again. */
  gapWaitMs: number;
  onError?: (err: unknown) => void;
}

/** Live text held ahead of a gap at most; past it, it is dropped and read from the table once stored. */
const MAX_AHEAD_BYTES = 1024 * 1024;
/** A read of the table per gap at most this often, however long it lasts. */
const MAX_GAP_WAIT_MS = 2_000;
/** Bytes of stored text read at once: what the send buffer has room for, within these. */
const READ_BYTES = { least: 64 * 1024, most: 1024 * 1024 };

export class OutputFeed extends Pullable<OutputChunk> {
  /** Where the text handed out (or waiting to be) ends. */
  private position: number;
  /** Text waiting for the reader, from `bufferOffset`. */
  private buffer = '';
  private bufferOffset: number;
  private held = 0;
  private final = false;
  /** Live chunks past `position`, waiting for the gap before them. */
  private ahead: OutputChunk[] = [];
  private aheadBytes = 0;
  private reading = false;
  private readAgain = false;
  /** The send buffer was full: live text is not taken until the reader drains and the table is read. */
  private behind = false;
  private gapTimer: NodeJS.Timeout | undefined;
  private gapWaits = 0;
  private cancelRoomWait: (() => void) | undefined;
  private finalSent = false;
  private readonly sendBuffer: SendBuffer;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: OutputFeedOptions) {
    super(() => this.unsubscribe());
    this.position = this.bufferOffset = options.afterOffset;
    this.sendBuffer = options.sendBuffer;
    const { hub, tenant, runId, stream } = options;
    this.unsubscribe = hub.subscribe(topics.output(tenant, runId, stream), {
      change: (change) => {
        if (change.kind === 'output') this.live(change.chunk);
      },
      resync: () => this.read(),
      refill: () => this.read(),
    });
    this.read();
  }

  /** Ends the stream once what waits is taken (server shutdown). */
  end() {
    if (!this.buffer) this.close();
    else this.final = true;
  }

  private live(chunk: OutputChunk) {
    if (this.done || this.behind) return;
    if (endOf(chunk) <= this.position && !(chunk.final && endOf(chunk) === this.position && !this.final)) return;
    if (this.reading || chunk.offset > this.position) return this.hold(chunk);
    this.take_(chunk);
    this.handOver();
  }

  /** Adds what a chunk has past `position` to the text waiting for the reader. */
  private take_(chunk: OutputChunk) {
    const text = chunk.offset < this.position ? slicePoints(chunk.text, this.position - chunk.offset) : chunk.text;
    const bytes = Buffer.byteLength(text);
    if (bytes > 0 && !this.sendBuffer.tryHold(bytes)) {
      // Full: nothing more is taken live; the table has it once the reader drains (room for
      // this text, or an empty buffer), and nothing else would start that read.
      this.behind = true;
      this.ahead = [];
      this.aheadBytes = 0;
      this.waitForRoom(Math.min(bytes, this.sendBuffer.limit));
      return;
    }
    this.held += bytes;
    if (!this.buffer) this.bufferOffset = this.position;
    this.buffer += text;
    this.position += codePoints(text);
    if (chunk.final && this.position === endOf(chunk)) this.final = true;
  }

  private hold(chunk: OutputChunk) {
    this.aheadBytes += Buffer.byteLength(chunk.text);
    if (this.aheadBytes > MAX_AHEAD_BYTES) {
      this.ahead = [];
      this.aheadBytes = 0;
    } else this.ahead.push(chunk);
    if (!this.reading) this.waitForGap();
  }

  /** Takes the held chunks that now follow on; a gap left: the table is read again after a while. */
  private drainAhead() {
    this.ahead.sort((a, b) => a.offset - b.offset);
    const later: OutputChunk[] = [];
    for (const chunk of this.ahead) {
      if (this.behind) break;
      if (endOf(chunk) <= this.position) continue;
      if (chunk.offset <= this.position) this.take_(chunk);
      else later.push(chunk);
    }
    this.ahead = this.behind ? [] : later;
    this.aheadBytes = this.ahead.reduce((bytes, chunk) => bytes + Buffer.byteLength(chunk.text), 0);
    if (this.ahead.length > 0) this.waitForGap();
    else this.gapWaits = 0;
  }

  private waitForGap() {
    if (this.gapTimer || this.done) return;
    const delay = Math.min(MAX_GAP_WAIT_MS, this.options.gapWaitMs * 2 ** this.gapWaits++);
    this.gapTimer = setTimeout(() => {
      this.gapTimer = undefined;
      this.read();
    }, delay);
    this.gapTimer.unref();
  }

  /** Reads the stored text from `position` (one read at a time; one more if asked meanwhile). */
  private read() {
    if (this.done || this.final) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    if (this.sendBuffer.full) return void this.waitForRoom();
    this.reading = true;
    const { table, runId, stream } = this.options;
    table
      .output(runId, stream, this.position, () =>
        // Filled while this read waited for its place (its socket stopped taking frames): nothing
        // read could be held, so nothing is read; the feed reads once there is room.
        this.sendBuffer.full
          ? undefined
          : Math.min(READ_BYTES.most, Math.max(READ_BYTES.least, this.sendBuffer.limit - this.sendBuffer.bytes)),
      )
      .then((stored) => {
        this.reading = false;
        if (this.done) return;
        if (!stored) return void this.waitForRoom();
        this.behind = false;
        if (stored.text || stored.final) this.take_(stored);
        // Text accepted here and not stored yet follows on at once.
        const waiting = this.options.waiting?.();
        if (waiting && !this.behind) this.live(waiting);
        this.drainAhead();
        this.handOver();
        // More stored text than one read takes (counted in whole chunks, so not by the text it
        // gave from `position`), or a read asked for while this one was out.
        if (!this.behind && !this.final && (this.readAgain || stored.more)) {
          this.readAgain = false;
          this.read();
        }
      })
      .catch((err) => {
        this.reading = false;
        this.options.onError?.(err);
        this.fail(err);
      });
  }

  private waitForRoom(bytes = 1) {
    if (this.cancelRoomWait) return;
    this.cancelRoomWait = this.sendBuffer.whenRoom(bytes, () => {
      this.cancelRoomWait = undefined;
      this.read();
    });
  }

  protected take(): IteratorResult<OutputChunk> | undefined {
    return this.buffer || this.finalPending ? { value: this.handOff(), done: false } : undefined;
  }

  /** The end was reached: the reader gets one final chunk (empty when its text went before). */
  private get finalPending() {
    return this.final && !this.finalSent;
  }

  private handOff(): OutputChunk {
    const { runId, stream } = this.options;
    const chunk: OutputChunk = { runId, stream, offset: this.bufferOffset, text: this.buffer, final: this.final };
    this.sendBuffer.release(this.held);
    this.held = 0;
    this.bufferOffset = this.position;
    this.buffer = '';
    if (chunk.final) {
      this.finalSent = true;
      // The last text is out: the subscription completes after it.
      queueMicrotask(() => this.close());
    } else if (this.behind) this.read();
    return chunk;
  }

  private handOver() {
    if (!this.waiting) return;
    if (this.buffer || this.finalPending) this.hand(this.handOff());
  }

  protected cleanUp() {
    clearTimeout(this.gapTimer);
    this.cancelRoomWait?.();
    if (this.held) this.sendBuffer.release(this.held);
    this.held = 0;
    this.buffer = '';
    this.ahead = [];
  }
}
