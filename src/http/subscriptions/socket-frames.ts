/**
 * The one place Runplane writes graphql-ws frames itself. graphql-ws serializes every `next`
 * message for every subscriber on its own (`JSON.stringify` of the whole message, a promise per
 * send); a result that a thousand subscribers share is serialized once instead (resultJson) and
 * written here as the frame graphql-ws would write, `{"id":…,"type":"next","payload":…}`.
 *
 * graphql-ws still owns the operation: its `onOperation` hook (websocket.ts) hands it the
 * iterator returned here, which yields nothing and ends when the results end, so `complete`,
 * unsubscribe (`return()`) and close work as graphql-ws defines them. A failure is thrown to it
 * masked, and it sends the `error` frame. test/http/socket-frames.unit.test.ts fails if graphql-ws
 * changes the frame it writes or how it ends an operation.
 *
 * Those frames go to the TCP socket under ws (text-frames.ts), beside ws's own writes: ws writes
 * each of its frames at once, in order, as long as no extension compresses them (websocket.ts
 * turns permessage-deflate off for this) and it is given strings, never Blobs, which graphql-ws
 * and the liveness pings are. Before each write, the socket must be open to ws: nothing follows
 * its close frame.
 *
 * Every frame holds its size in the connection's send buffer until the socket has taken it;
 * while the send buffer is full the feeds of the socket hand over nothing more, so a client that
 * stops reading costs the send buffer and no more (its feeds read on from the table later).
 */
import type { Socket } from 'node:net';
import { type ExecutionResult, GraphQLError } from 'graphql';
import type { WebSocket } from 'ws';
import { attached } from '../../lib/attached.ts';
import type { SendBuffer } from '../../lib/send-buffer.ts';
import type { Mask } from '../errors.ts';
import { type Results, resultJson } from './shared-execution.ts';
import { ownBytes, textFrame } from './text-frames.ts';

const UNEXPECTED = 'Unexpected error.';

/** What comes before a result's JSON in operation `id`'s `next` frames (built once per subscription). */
const nextFrameHead = (id: string) => `{"id":${JSON.stringify(id)},"type":"next","payload":`;

/** The `next` message of operation `id` for a result serialized as `json`: what delivery writes (as bytes, from the same head and `}`). */
export const nextFrame = (id: string, json: string) => `${nextFrameHead(id)}${json}}`;

/** A result's JSON and the `next` frame's closing brace, in UTF-8: the part of its frames every subscriber shares. */
const frameBodies = attached<ExecutionResult, Buffer>('frameBody');

const frameBody = (result: ExecutionResult, mask: Mask) =>
  frameBodies.get(result) ?? frameBodies.set(result, ownBytes(`${resultJson(result, mask)}}`));

/** Sockets corked in this turn, uncorked together after it (one tick however many sockets an event goes to). */
const toUncork: Socket[] = [];

function uncorkAll() {
  try {
    // By index: a socket corked while these are uncorked joins this round.
    for (let i = 0; i < toUncork.length; i++) toUncork[i]?.uncork();
  } finally {
    toUncork.length = 0;
  }
}

/** Write a burst of frames with one write: a reader that fell behind catches up in fewer, larger writes. */
function corked(raw: Socket) {
  if (raw.writableCorked === 0) {
    raw.cork();
    if (toUncork.push(raw) === 1) process.nextTick(uncorkAll);
  }
}

export interface SocketSubscription {
  socket: WebSocket;
  /** The TCP socket under it (the upgraded request's), corked around bursts. */
  raw: Socket;
  id: string;
  mask: Mask;
  sendBuffer: SendBuffer;
  /** Gives the subscription's place back (caps per connection and tenant), however it ends. */
  release: () => void;
  /**
   * The subscription's own results under envelop's wrapping of `results`, when no per-result
   * hook but yoga's masking (which resultJson does alike) is on them: written from the live stage.
   */
  own?: Results;
}

const isOpen = (socket: WebSocket) => socket.readyState === socket.OPEN;

/**
 * Writes `results` to the socket as operation `id`'s frames; the iterator returned is graphql-ws's
 * handle on it. (Its functions are methods: an idle subscriber holds one of these, and each
 * function kept per subscriber is an object of its own.)
 */
export function deliverOverSocket(
  results: AsyncIterable<ExecutionResult>,
  { socket, raw, id, mask, sendBuffer, release, own }: SocketSubscription,
): AsyncIterableIterator<never> {
  const source = results[Symbol.asyncIterator]();
  /** What comes before the result's JSON in this subscription's frames (a string: an idle subscriber holds no buffer). */
  const head = nextFrameHead(id);
  const headBytes = Buffer.byteLength(head);
  /** Set once graphql-ws is done with the operation (unsubscribed, closed): nothing more is sent for it. */
  let stopped = false;
  const write = (result: ExecutionResult) => {
    const body = frameBody(result, mask);
    const frame = textFrame(head, headBytes, body, raw.writableLength > 0);
    // What the message takes in UTF-8 (a string's length counts a character past ASCII as 1 or 2).
    const bytes = headBytes + body.length;
    sendBuffer.hold(bytes);
    corked(raw);
    try {
      raw.write(frame, () => sendBuffer.release(bytes));
    } catch (err) {
      // Not sent: its callback never comes.
      sendBuffer.release(bytes);
      throw err;
    }
  };
  // The live stage: while the loop below waits, each event's result is written as the feed takes
  // it, in the feed's turn (no promise or loop step per event and subscriber). What it declines
  // (not ready at once, or not writable now) reaches the loop, in order.
  own?.deliverTo((result) => {
    if (stopped || !isOpen(socket)) return false;
    try {
      write(result);
    } catch {
      return false;
    }
    return true;
  });
  const delivered = (async () => {
    try {
      let item: IteratorResult<ExecutionResult> | undefined;
      for (;;) {
        // The feed hands over an event only while the send buffer has room for it (the frames below hold it).
        item = await source.next();
        if (item.done || stopped || !isOpen(socket)) break;
        write(item.value);
        // Let go before the next wait: a suspended function keeps what its variables held, and
        // a result holds its event, JSON and frame (a socket then held one per subscription).
        item = undefined;
      }
    } catch (err) {
      // A reader that went away mid-write is an ordinary end, not a failure to report.
      if (stopped || !isOpen(socket)) return;
      throw err instanceof GraphQLError && !err.originalError ? err : mask(err, UNEXPECTED);
    } finally {
      // However the loop ends, the feed is closed and its place given back: graphql-ws forgets a finished operation.
      release();
      await source.return?.();
    }
  })();
  // Observed here too: graphql-ws may drop the operation without ever asking for next().
  delivered.catch(() => undefined);
  // Hand-written, not a Repeater: graphql-ws may call return() before ever calling next(), and a
  // Repeater that has not started would not pass that on; delivery must stop all the same.
  const handle: AsyncIterableIterator<never> = {
    next() {
      return delivered.then(() => ({ done: true as const, value: undefined as never }));
    },
    async return() {
      stopped = true;
      await source.return?.();
      return { done: true as const, value: undefined as never };
    },
    async throw(err: unknown) {
      await handle.return?.();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return handle;
    },
  };
  return handle;
}
