/**
 * Subscriptions over SSE (GraphQL over SSE, distinct connections mode): one response per
 * subscription, `event: next` per result, `event: complete` when it really ends. Results
 * are pulled one at a time as the client takes them (the node adapter waits for the socket
 * to drain), so a client that stops reading holds one frame here, and its feed's bounded
 * queue; the rest waits in the table.
 */

import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { endOf, type OutputChunk } from '../../domain/output.ts';
import type { DeliveredEvent, Lease } from '../../domain/run.ts';
import type { Context } from '../../schema/context.ts';
import type { Mask } from '../errors.ts';
import { resultJson, sourceOf } from './shared-execution.ts';

/** A comment line now and then keeps proxies from closing a quiet stream. */
const PING_MS = 12_000;

const encoder = new TextEncoder();

/**
 * The SSE id of a subscription's event, so that a client reconnecting with Last-Event-ID
 * resumes after it: a runEvents event's seq (none for an event delivered late, which would
 * take a resuming client back), a run's `<version>.<budget version>`, a lease's version.
 */
export function streamEventId(event: unknown): string | undefined {
  if (event === null || typeof event !== 'object') return undefined;
  if ('seq' in event && 'runId' in event) return (event as DeliveredEvent).late ? undefined : String((event as DeliveredEvent).seq);
  if ('run' in event) {
    const { run, budget, claim } = event as {
      run: { version: number };
      budget: { version: number } | null;
      claim?: { version: number } | null;
    };
    return claim ? `${run.version}.${budget?.version ?? 0}.${claim.version}` : `${run.version}.${budget?.version ?? 0}`;
  }
  if ('unitId' in event && 'version' in event) return String((event as Lease).version);
  // An output chunk: the offset after it, where a resuming reader goes on.
  if ('stream' in event && 'offset' in event && 'text' in event) return String(endOf(event as OutputChunk));
  return undefined;
}

export function sseStream(
  results: AsyncIterable<ExecutionResult>,
  mask: Mask,
  /** Whether the server is stopping: a stream that ends then is cut, not completed (the client comes back). */
  stopping: () => boolean,
  Stream: typeof ReadableStream = ReadableStream,
): ReadableStream<Uint8Array> {
  const iterator = results[Symbol.asyncIterator]();
  let ping: NodeJS.Timeout | undefined;
  const stop = () => clearInterval(ping);
  return new Stream<Uint8Array>({
    start(controller) {
      // Some clients only see the response once something is in it; EventSource reconnects after a second.
      controller.enqueue(encoder.encode(':\nretry: 1000\n\n'));
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
          // Completed only when the subscription really ended; a stopping server just ends the response.
          frame = stopping() ? '' : 'event: complete\ndata:\n\n';
          last = true;
        } else if (!('data' in item.value)) {
          // Not an event's result but the subscription's failure (yoga hands a failed stream's
          // error on as a result without data): said once, then the stream ends.
          frame = `event: next\ndata: ${resultJson(item.value, mask)}\n\nevent: complete\ndata:\n\n`;
          last = true;
          void iterator.return?.();
        } else {
          const id = streamEventId(sourceOf(item.value));
          frame = `event: next\n${id ? `id: ${id}\n` : ''}data: ${resultJson(item.value, mask)}\n\n`;
        }
      } catch (err) {
        // The subscription failed (or its key was revoked): say why, then end it.
        const error = mask(err, 'Unexpected error.');
        frame = `event: next\ndata: ${resultJson({ errors: [error as never] }, mask)}\n\nevent: complete\ndata:\n\n`;
        last = true;
      }
      if (frame) controller.enqueue(encoder.encode(frame));
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
export function sseDelivery(mask: Mask, stopping: () => boolean): Plugin<Context> {
  return {
    onResultProcess({ request, result, setResultProcessor }) {
      if (!acceptsEventStream(request) || !(Symbol.asyncIterator in (result as object))) return;
      setResultProcessor(
        (stream, fetchAPI) =>
          new fetchAPI.Response(sseStream(stream as AsyncIterable<ExecutionResult>, mask, stopping, fetchAPI.ReadableStream), {
            status: 200,
            headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
          }),
        'text/event-stream',
      );
    },
  };
}
