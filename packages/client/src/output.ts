/**
 * Live output from the client: a writer that batches text and keeps offsets for you, and a
 * resuming stream of a run's output text.
 *
 * The writer sends what was written since its last send at most every `intervalMs`, one request
 * at a time, on the client's WebSocket when it has one. It keeps every character the server has
 * not said is stored, and after a failure (a dropped connection, another server) sends it again
 * from the stored length: the server takes text at an offset once, so nothing is lost or doubled.
 */
import { clientCodes, RunplaneError } from './errors.ts';
import { type Document, operationOf, type ResultOf } from './graphql.ts';
import { type HttpConnection, send } from './http.ts';
import type { Notice } from './notices.ts';
import { AppendOutput, OutputLengths, RunOutput } from './operations.ts';
import { resuming } from './resuming.ts';
import { Attempts, type RetryPolicy, sleep } from './retry.ts';
import type { StreamDeps } from './run-events.ts';

export interface OutputWriterOptions {
  /** The run claim's token (withRun hands it in): a write is refused once the claim is lost. */
  fencingToken?: number;
  /** Where the stream stands now; read from the run when absent. */
  offset?: number;
  /** Text written within this is sent together (default 50 ms). */
  intervalMs?: number;
  signal?: AbortSignal;
}

export interface OutputWriter {
  /** Appends text (sent within `intervalMs`); throws once the writer has failed. */
  write(text: string): void;
  /** Resolves once everything written so far is stored. */
  flush(): Promise<void>;
  /** Sends what is left, closes the stream (final) and resolves once it is stored. */
  close(): Promise<void>;
  /** Code points written so far (the stream's length once all is sent). */
  readonly length: number;
  /** Code points the server has said are stored. */
  readonly durableLength: number;
}

/** Text the server has not said is stored, past which a send asks it to store first (bounds what the writer keeps). */
const MAX_UNCONFIRMED_CHARS = 64 * 1024;

const points = (text: string) => {
  let count = 0;
  for (const _ of text) count++;
  return count;
};
/** `text` from code point `from` on. */
const fromPoint = (text: string, from: number) => {
  let i = 0;
  for (let seen = 0; seen < from && i < text.length; seen++) i += (text.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
  return text.slice(i);
};

export interface OutputDeps extends StreamDeps {
  http: HttpConnection;
  retry: RetryPolicy;
  onNotice: (notice: Notice) => void;
}

type Answer = ResultOf<typeof AppendOutput>['appendOutput'];

export function outputWriter(deps: OutputDeps, runId: string, stream: string, options: OutputWriterOptions = {}): OutputWriter {
  const intervalMs = options.intervalMs ?? 50;
  /** Everything past `durable` that was written: sent or not. */
  let unconfirmed = '';
  let durable = options.offset ?? -1;
  /** Code points of `unconfirmed` the server has taken (accepted, maybe not stored). */
  let accepted = 0;
  let written = 0;
  let closing = false;
  let closed = false;
  let failure: RunplaneError | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let sending: Promise<void> | undefined;
  const idle: Array<{ resolve: () => void; reject: (err: unknown) => void; stored: boolean }> = [];

  const execute = async (input: Record<string, unknown>): Promise<Answer> => {
    const transport = deps.transport();
    const document = AppendOutput as Document;
    if (transport.execute && operationOf(document) === 'mutation') {
      const data = await transport.execute(document, { input }, options.signal);
      return data.appendOutput as Answer;
    }
    return (
      await send(deps.http, AppendOutput, { input: input as never }, { signal: options.signal, retry: false, onNotice: deps.onNotice })
    ).appendOutput;
  };

  const fail = (error: RunplaneError) => {
    failure ??= error;
    for (const waiter of idle.splice(0)) waiter.reject(failure);
  };

  const settle = () => {
    const allSent = accepted === points(unconfirmed) || unconfirmed === '';
    for (let i = idle.length - 1; i >= 0; i--) {
      const waiter = idle[i] as (typeof idle)[number];
      if (allSent && !timer && (!waiter.stored || unconfirmed === '') && (!closing || closed)) {
        idle.splice(i, 1);
        waiter.resolve();
      }
    }
  };

  /** Sends what waits, one request at a time, until nothing does; retries from the stored length. */
  async function pump() {
    const attempts = new Attempts(deps.retry);
    if (durable < 0) {
      const read = await send(
        deps.http,
        OutputLengths,
        { id: runId },
        { signal: options.signal, retry: deps.retry, onNotice: deps.onNotice },
      );
      if (!read.run) throw new RunplaneError('NOT_FOUND', `run ${runId} does not exist`, { details: { runId } });
      durable = read.run.outputs.find((o) => o.stream === stream)?.length ?? 0;
    }
    for (;;) {
      const pending = fromPoint(unconfirmed, accepted);
      const wantsStored = idle.some((w) => w.stored) || closing || points(unconfirmed) > MAX_UNCONFIRMED_CHARS;
      let input: { offset: number; text: string; final: boolean };
      if (pending || (closing && !closed)) input = { offset: durable + accepted, text: pending, final: closing };
      // All sent, not all stored: the last character again (a retry, taken once) asks the server to store what it holds.
      else if (wantsStored && accepted > 0)
        input = { offset: durable + accepted - 1, text: fromPoint(unconfirmed, accepted - 1), final: false };
      else return;
      let answer: Answer;
      try {
        answer = await execute({ runId, stream, ...input, durable: wantsStored, fencingToken: options.fencingToken });
      } catch (err) {
        const error = err instanceof RunplaneError ? err : new RunplaneError(clientCodes.network, String(err), { retryable: true });
        const delay = attempts.next(error);
        if (delay === undefined) throw error;
        deps.onNotice({ kind: 'retry', operation: 'appendOutput', attempt: attempts.count, delayMs: delay, error });
        await sleep(delay, options.signal);
        continue;
      }
      attempts.reset();
      if (answer.__typename === 'OutputChunk') {
        const end = answer.offset + points(answer.text);
        accepted = Math.max(accepted, end - durable);
        if (answer.final) closed = true;
        if (answer.durable) {
          // Stored up to the end of this chunk: that text need not be kept any more.
          unconfirmed = fromPoint(unconfirmed, end - durable);
          accepted -= end - durable;
          durable = end;
        }
        settle();
        continue;
      }
      if (answer.__typename === 'OffsetConflict') {
        // The stream is `length` long: within what this writer holds, the server lost what it had
        // not stored (a restart, another server) or took more than it answered; go on from there.
        if (answer.length >= durable && answer.length <= durable + points(unconfirmed)) {
          accepted = answer.length - durable;
          continue;
        }
        throw new RunplaneError(clientCodes.outputConflict, answer.message, { details: { runId, stream, length: answer.length } });
      }
      if (answer.__typename === 'ClaimLost')
        throw new RunplaneError(clientCodes.claimLost, answer.message, {
          details: { runId, holder: answer.currentHolder, token: answer.currentToken },
        });
      throw new RunplaneError('NOT_FOUND', answer.message, { details: { runId } });
    }
  }

  const kick = () => {
    if (sending || failure) return;
    sending = pump()
      .catch((err) => fail(err instanceof RunplaneError ? err : new RunplaneError(clientCodes.network, String(err), { retryable: true })))
      .finally(() => {
        sending = undefined;
        if (failure) return;
        // Written while the last request was out.
        if (fromPoint(unconfirmed, accepted) || idle.length > 0) schedule(0);
        settle();
      });
  };

  const schedule = (delay: number) => {
    if (timer || failure) return;
    timer = setTimeout(() => {
      timer = undefined;
      kick();
    }, delay);
  };

  const waitFor = (stored: boolean) =>
    new Promise<void>((resolve, reject) => {
      if (failure) return reject(failure);
      idle.push({ resolve, reject, stored });
      clearTimeout(timer);
      timer = undefined;
      kick();
      settle();
    });

  return {
    write(text: string) {
      if (failure) throw failure;
      if (closing)
        throw new RunplaneError(clientCodes.outputConflict, `output stream ${stream} is being closed: nothing more can be written`);
      if (!text) return;
      unconfirmed += text;
      written += points(text);
      schedule(intervalMs);
    },
    flush: () => waitFor(true),
    async close() {
      closing = true;
      await waitFor(true);
    },
    get length() {
      return durable < 0 ? written : durable + points(unconfirmed);
    },
    get durableLength() {
      return Math.max(0, durable);
    },
  };
}

export interface RunOutputOptions {
  /** Text after this many code points (default 0: all of it). */
  afterOffset?: number;
  signal?: AbortSignal;
}

/** A run's output stream as text, from `afterOffset`, across reconnects, each character once; ends after the final text. */
export function runOutput(deps: StreamDeps, runId: string, stream: string, { afterOffset = 0, signal }: RunOutputOptions = {}) {
  let position = afterOffset;
  return resuming<string>({
    stream: 'runOutput',
    transport: deps.transport(),
    // A slow reader's text is coalesced by the server; the client holds a bounded backlog.
    policy: 'backlog',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    request: () => ({ document: RunOutput, variables: { runId, stream, afterOffset: position }, lastEventId: String(position) }),
    accept: (result) => {
      const chunk = result.data.runOutput as ResultOf<typeof RunOutput>['runOutput'];
      const end = chunk.offset + points(chunk.text);
      // What came before the position (a resumed subscription's overlap) is not handed out again.
      if (end <= position) return [];
      const text = chunk.offset < position ? fromPoint(chunk.text, position - chunk.offset) : chunk.text;
      position = end;
      return text ? [text] : [];
    },
  });
}
