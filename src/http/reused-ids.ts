/**
 * A client may use an operation's id again once it has sent `complete` for it: the protocol
 * allows it, and hand-written clients do it (one id per kind of subscription). graphql-ws ends
 * the old operation some turns of the event loop after the `complete`; meeting the new one
 * under the same id by then, it sends `complete` for that id and forgets the new operation, so
 * the client's new subscription is lost without an error (and an old operation still being
 * admitted would even go on under the new one's id). So here a `subscribe` whose id is still
 * ending waits, with the messages of that id after it, until graphql-ws is done with the old
 * operation. A `subscribe` for an id still in use without a `complete` goes straight on, for
 * graphql-ws to close the socket with 4409 as the protocol says.
 */
import type { RawData, WebSocket } from 'ws';

/** Messages one socket may have waiting behind ids' ends; past it the socket is cut (a client flooding). */
export const MAX_HELD_MESSAGES = 64;

type Listener = (data: RawData, isBinary: boolean) => unknown;

/** The `type` and `id` of a graphql-ws message, if it has both (anything else is graphql-ws's to refuse). */
function peek(data: RawData): { type: string; id: string } | undefined {
  try {
    const message: unknown = JSON.parse(String(data));
    if (typeof message !== 'object' || message === null) return undefined;
    const { type, id } = message as { type?: unknown; id?: unknown };
    return typeof type === 'string' && typeof id === 'string' ? { type, id } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Puts itself between `socket`'s message listeners (graphql-ws's, attached by now) and the
 * socket, so that a reused id waits for its old operation's end. Only that id's messages wait
 * (graphql-ws orders nothing across ids); what waits is bounded by count and by bytes, past
 * which the socket is cut, and dropped when the socket closes.
 */
export function reusedIdsWaitForTheirEnd(socket: WebSocket, { maxHeldBytes }: { maxHeldBytes: number }) {
  const listeners = socket.listeners('message') as Listener[];
  socket.removeAllListeners('message');
  const only = listeners.length === 1 ? listeners[0] : undefined;
  /** Each id's operation, until graphql-ws is done with it (its subscribe message handled to the end). */
  const running = new Map<string, Promise<unknown>>();
  /** Ids the client completed whose operation is still running. */
  const ending = new Set<string>();
  /** Messages of an id waiting for its old operation's end, in order. */
  const held = new Map<string, Array<[RawData, boolean]>>();
  let heldCount = 0;
  let heldBytes = 0;
  let closed = false;
  socket.once('close', () => {
    closed = true;
    held.clear();
  });

  const hand = (data: RawData, isBinary: boolean): Promise<unknown> =>
    only
      ? Promise.resolve(only.call(socket, data, isBinary))
      : Promise.all(listeners.map((listener) => listener.call(socket, data, isBinary)));

  const hold = (id: string, data: RawData, isBinary: boolean) => {
    const bytes = sizeOf(data);
    if (heldCount >= MAX_HELD_MESSAGES || heldBytes + bytes > maxHeldBytes) {
      socket.terminate();
      return;
    }
    heldCount++;
    heldBytes += bytes;
    const queue = held.get(id);
    if (queue) queue.push([data, isBinary]);
    else held.set(id, [[data, isBinary]]);
  };

  /** Lets `id`'s messages go on once graphql-ws has let go of its old operation (the turn after its handling ended). */
  const release = (id: string) =>
    setImmediate(() => {
      const queue = held.get(id);
      held.delete(id);
      if (closed || !queue) return;
      for (const [data, isBinary] of queue) {
        heldCount--;
        heldBytes -= sizeOf(data);
        // A subscribe among them may wait again: the rest then waits behind it.
        if (held.has(id)) hold(id, data, isBinary);
        else dispatch(data, isBinary);
      }
    });

  const dispatch = (data: RawData, isBinary: boolean) => {
    const message = peek(data);
    if (message && held.has(message.id)) return hold(message.id, data, isBinary);
    if (message?.type === 'subscribe') {
      const { id } = message;
      const before = ending.has(id) ? running.get(id) : undefined;
      if (before) {
        hold(id, data, isBinary);
        void before.then(
          () => release(id),
          () => release(id),
        );
        return;
      }
      const handled = hand(data, isBinary);
      running.set(id, handled);
      const done = () => {
        if (running.get(id) !== handled) return;
        running.delete(id);
        ending.delete(id);
      };
      void handled.then(done, done);
      return;
    }
    if (message?.type === 'complete' && running.has(message.id)) ending.add(message.id);
    void hand(data, isBinary);
  };

  socket.on('message', (data: RawData, isBinary: boolean) => {
    if (!closed) dispatch(data, isBinary);
  });
}

const sizeOf = (data: RawData) =>
  Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : (data as Buffer | ArrayBuffer).byteLength;
