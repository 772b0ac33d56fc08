/**
 * A client may use an operation's id again once it has sent `complete` for it: the protocol
 * allows it, and hand-written clients do it (one id per kind of subscription). graphql-ws ends
 * the old operation some turns of the event loop after the `complete`; meeting the new one
 * under the same id by then, it sends `complete` for that id and forgets the new operation, so
 * the client's new subscription is lost without an error (and an old operation still being
 * admitted would even go on under the new one's id). So here a `subscribe` whose id is still
 * ending waits, with every message after it (order is the protocol's), until graphql-ws is
 * done with the old operation. A `subscribe` for an id still in use without a `complete` goes
 * straight on, for graphql-ws to close the socket with 4409 as the protocol says.
 */
import type { RawData, WebSocket } from 'ws';

/** Messages one socket may have waiting behind an id's end; past it the socket is cut (a client flooding). */
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
 * socket, so that a reused id waits for its old operation's end.
 */
export function reusedIdsWaitForTheirEnd(socket: WebSocket) {
  const listeners = socket.listeners('message') as Listener[];
  socket.removeAllListeners('message');
  /** Each id's operation, until graphql-ws is done with it (its subscribe message handled to the end). */
  const running = new Map<string, Promise<unknown>>();
  /** Ids the client completed whose operation is still running. */
  const ending = new Set<string>();
  const held: Array<[RawData, boolean]> = [];
  let waiting = false;

  const only = listeners.length === 1 ? listeners[0] : undefined;
  const hand = (data: RawData, isBinary: boolean): Promise<unknown> =>
    only
      ? Promise.resolve(only.call(socket, data, isBinary))
      : Promise.all(listeners.map((listener) => listener.call(socket, data, isBinary)));

  const dispatch = (data: RawData, isBinary: boolean): boolean => {
    const message = peek(data);
    if (message?.type === 'subscribe') {
      const before = ending.has(message.id) ? running.get(message.id) : undefined;
      if (before) {
        // Resumed once graphql-ws has let go of the old operation (its handling over, and the turn after it).
        waiting = true;
        held.unshift([data, isBinary]);
        void before.then(resume, resume);
        return false;
      }
      const handled = hand(data, isBinary);
      running.set(message.id, handled);
      const done = () => {
        if (running.get(message.id) !== handled) return;
        running.delete(message.id);
        ending.delete(message.id);
      };
      void handled.then(done, done);
      return true;
    }
    if (message?.type === 'complete' && running.has(message.id)) ending.add(message.id);
    void hand(data, isBinary);
    return true;
  };

  const resume = () =>
    setImmediate(() => {
      waiting = false;
      while (!waiting && held.length > 0) {
        const [data, isBinary] = held.shift() as [RawData, boolean];
        dispatch(data, isBinary);
      }
    });

  socket.on('message', (data: RawData, isBinary: boolean) => {
    if (!waiting) {
      dispatch(data, isBinary);
      return;
    }
    if (held.length >= MAX_HELD_MESSAGES) {
      socket.terminate();
      return;
    }
    held.push([data, isBinary]);
  });
}
