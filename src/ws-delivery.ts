/**
 * Subscriptions over WebSocket, fed straight from their source to the socket: each event is
 * executed once for every subscriber asking alike (shared-delivery.ts), serialized once, and
 * written as the `next` frame graphql-ws would write, without the per-result layers of
 * envelop and graphql-ws between. graphql-ws still owns the operation: it gets an iterator
 * that yields nothing and ends when the source ends, so `complete`, unsubscribe (`return()`)
 * and close work as before; a failure is thrown to it masked, as yoga would mask it.
 */
import { createSourceEventStream, type ExecutionArgs, type ExecutionResult, GraphQLError } from 'graphql';
import type { WebSocket } from 'ws';
import { sharedExecution } from './shared-delivery.ts';

export type Mask = (error: unknown, message: string) => Error;

const UNEXPECTED = 'Unexpected error.';

/** A result's JSON, by result: subscribers sharing a result share its serialization. */
const serialized = new WeakMap<ExecutionResult, string>();

const masked = (result: ExecutionResult, mask: Mask): ExecutionResult =>
  result.errors ? { ...result, errors: result.errors.map((e) => mask(e, UNEXPECTED) as GraphQLError) } : result;

function toJson(result: ExecutionResult, mask: Mask) {
  let json = serialized.get(result);
  if (json === undefined) {
    json = JSON.stringify(masked(result, mask));
    serialized.set(result, json);
  }
  return json;
}

/** Write a burst of frames with one write: a reader that fell behind catches up in fewer, larger writes. */
function corked(socket: WebSocket) {
  const raw = (socket as unknown as { _socket?: { cork(): void; uncork(): void; writableCorked: number } })._socket;
  if (raw && raw.writableCorked === 0) {
    raw.cork();
    process.nextTick(() => raw.uncork());
  }
}

/** Past this much unsent, the next write waits for the socket: the backlog stays in the feed, which bounds it. */
const HIGH_WATER = 256 * 1024;

export async function subscribeOverSocket(args: ExecutionArgs, socket: WebSocket, id: string, mask: Mask) {
  let stream: Awaited<ReturnType<typeof createSourceEventStream>>;
  try {
    stream = await createSourceEventStream(args);
  } catch (err) {
    return { errors: [mask(err, UNEXPECTED) as GraphQLError] };
  }
  if (!(Symbol.asyncIterator in stream)) return masked(stream, mask);
  const source = stream[Symbol.asyncIterator]();
  const execute = sharedExecution(args);
  const prefix = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
  const open = () => socket.readyState === socket.OPEN;
  /** Set once graphql-ws is done with the operation (unsubscribed, closed): nothing more is sent for it. */
  let stopped = false;
  const delivered = (async () => {
    try {
      for (let item = await source.next(); !item.done; item = await source.next()) {
        const result = await execute(item.value);
        if (stopped || !open()) break;
        const frame = `${prefix}${toJson(result, mask)}}`;
        corked(socket);
        if (socket.bufferedAmount < HIGH_WATER) socket.send(frame);
        else await new Promise<void>((resolve, reject) => socket.send(frame, (err) => (err ? reject(err) : resolve())));
      }
    } catch (err) {
      // A reader that went away mid-write is an ordinary end, not a failure to report.
      if (stopped || !open()) return;
      throw err instanceof GraphQLError && !err.originalError ? err : mask(err, UNEXPECTED);
    } finally {
      // However the loop ends, the feed is closed: graphql-ws forgets a finished operation.
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
