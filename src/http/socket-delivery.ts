/**
 * Subscriptions over WebSocket, fed straight from their source to the socket: each event is
 * executed once for every subscriber asking alike (shared-delivery.ts), serialized once, and
 * written as the `next` frame graphql-ws would write, without the per-result layers of
 * envelop and graphql-ws between. graphql-ws still owns the operation: it gets an iterator
 * that yields nothing and ends when the source ends, so `complete`, unsubscribe (`return()`)
 * and close work as before; a failure is thrown to it masked, as yoga would mask it.
 *
 * Every frame holds its size in the connection's send budget until the socket has taken it;
 * while the budget is full the feeds of the socket hand over nothing more, so a client that
 * stops reading costs the budget and no more (its feeds read on from the table later).
 */
import { createSourceEventStream, type ExecutionArgs, GraphQLError } from 'graphql';
import type { WebSocket } from 'ws';
import type { SendBudget } from '../streams/send-budget.ts';
import type { Mask } from './errors.ts';
import { resultJson, sharedExecution } from './shared-execution.ts';

const UNEXPECTED = 'Unexpected error.';

/** Write a burst of frames with one write: a reader that fell behind catches up in fewer, larger writes. */
function corked(socket: WebSocket) {
  const raw = (socket as unknown as { _socket?: { cork(): void; uncork(): void; writableCorked: number } })._socket;
  if (raw && raw.writableCorked === 0) {
    raw.cork();
    process.nextTick(() => raw.uncork());
  }
}

export interface SocketSubscription {
  socket: WebSocket;
  id: string;
  mask: Mask;
  budget: SendBudget;
  /** Gives the subscription's place back (caps per connection and tenant), however it ends. */
  release: () => void;
}

export async function subscribeOverSocket(args: ExecutionArgs, { socket, id, mask, budget, release }: SocketSubscription) {
  let stream: Awaited<ReturnType<typeof createSourceEventStream>>;
  try {
    stream = await createSourceEventStream(args);
  } catch (err) {
    release();
    return { errors: [mask(err, UNEXPECTED) as GraphQLError] };
  }
  if (!(Symbol.asyncIterator in stream)) {
    release();
    return { errors: stream.errors?.map((error) => mask(error, UNEXPECTED) as GraphQLError) };
  }
  const source = stream[Symbol.asyncIterator]();
  const execute = sharedExecution(args);
  const prefix = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
  const open = () => socket.readyState === socket.OPEN;
  /** Set once graphql-ws is done with the operation (unsubscribed, closed): nothing more is sent for it. */
  let stopped = false;
  const delivered = (async () => {
    try {
      for (;;) {
        // The feed hands over an event only while the budget has room for it (the frames below hold it).
        const item = await source.next();
        if (item.done) break;
        const result = await execute(item.value);
        if (stopped || !open()) break;
        const frame = `${prefix}${resultJson(result, mask)}}`;
        const bytes = frame.length;
        budget.hold(bytes);
        corked(socket);
        socket.send(frame, () => budget.release(bytes));
      }
    } catch (err) {
      // A reader that went away mid-write is an ordinary end, not a failure to report.
      if (stopped || !open()) return;
      throw err instanceof GraphQLError && !err.originalError ? err : mask(err, UNEXPECTED);
    } finally {
      // However the loop ends, the feed is closed and its place given back: graphql-ws forgets a finished operation.
      release();
      await source.return?.();
    }
  })();
  // Observed here too: graphql-ws may drop the operation without ever asking for next().
  delivered.catch(() => undefined);
  const stop = async () => {
    stopped = true;
    await source.return?.();
    return { done: true as const, value: undefined as never };
  };
  // Hand-written, not a Repeater: graphql-ws may call return() before ever calling next(), and a
  // Repeater that has not started would not pass that on; delivery must stop all the same.
  const silent: AsyncIterableIterator<never> = {
    next: () => delivered.then(() => ({ done: true as const, value: undefined as never })),
    return: stop,
    async throw(err: unknown) {
      await stop();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return silent;
    },
  };
  return silent;
}
