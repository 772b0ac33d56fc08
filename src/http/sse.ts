/**
 * Subscriptions over SSE (GraphQL over SSE, distinct connections mode): one response per
 * subscription, `event: next` per result, `event: complete` when it really ends. Results
 * are pulled one at a time as the client takes them (the node adapter waits for the socket
 * to drain), so a client that stops reading holds one frame here, and its feed's bounded
 * queue; the rest waits in the table.
 */
import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../context.ts';
import { resultJson } from '../shared-delivery.ts';

/** A comment line now and then keeps proxies from closing a quiet stream. */
const PING_MS = 12_000;

type Mask = (error: unknown, message: string) => Error;

const encoder = new TextEncoder();

export function sseStream(
  results: AsyncIterable<ExecutionResult>,
  mask: Mask,
  Stream: typeof ReadableStream = ReadableStream,
): ReadableStream<Uint8Array> {
  const iterator = results[Symbol.asyncIterator]();
  let ping: NodeJS.Timeout | undefined;
  const stop = () => clearInterval(ping);
  return new Stream<Uint8Array>({
    start(controller) {
      // Some clients only see the response once something is in it.
      controller.enqueue(encoder.encode(':\n\n'));
      ping = setInterval(() => {
        if ((controller.desiredSize ?? 0) > 0) controller.enqueue(encoder.encode(':\n\n'));
      }, PING_MS);
      ping.unref();
    },
    async pull(controller) {
      let frame: string;
      let last = false;
      try {
        const item = await iterator.next();
        if (item.done) {
          frame = 'event: complete\ndata:\n\n';
          last = true;
        } else {
          frame = `event: next\ndata: ${resultJson(item.value, mask)}\n\n`;
        }
      } catch (err) {
        // The subscription failed (or its key was revoked): say why, then end it.
        const error = mask(err, 'Unexpected error.');
        frame = `event: next\ndata: ${resultJson({ errors: [error as never] }, mask)}\n\nevent: complete\ndata:\n\n`;
        last = true;
      }
      controller.enqueue(encoder.encode(frame));
      if (last) {
        stop();
        controller.close();
      }
    },
    async cancel() {
      stop();
      await iterator.return?.();
    },
  });
}

const acceptsEventStream = (request: Request) => /\btext\/event-stream\b/.test(request.headers.get('accept') ?? '');

/** Takes over yoga's SSE answer for subscriptions (its other answers stay as they are). */
export function sseDelivery(mask: Mask): Plugin<Context> {
  return {
    onResultProcess({ request, result, setResultProcessor }) {
      if (!acceptsEventStream(request) || !(Symbol.asyncIterator in (result as object))) return;
      setResultProcessor(
        (stream, fetchAPI) =>
          new fetchAPI.Response(sseStream(stream as AsyncIterable<ExecutionResult>, mask, fetchAPI.ReadableStream), {
            status: 200,
            headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
          }),
        'text/event-stream',
      );
    },
  };
}
