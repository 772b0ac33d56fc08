/**
 * Subscriptions over SSE (GraphQL over SSE, distinct connections: one response each). Written
 * by hand rather than with graphql-sse's client: the body is read only as the consumer asks
 * (back-pressure reaches the server through TCP), a stream that ends without `complete` (a
 * server stopping, a connection cut) is told apart from one that really ended, and each
 * resubscription carries its own resume point (afterSeq, Last-Event-ID). The framing itself
 * (CR, LF or CRLF line ends, comments, retry lines, events split across reads) is
 * eventsource-parser's.
 */

import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { clientCodes, fromGraphQLErrors, fromNetworkFailure, type GraphQLErrorLike, RunplaneError } from './errors.ts';
import { documentText } from './graphql.ts';
import { anySignal } from './signals.ts';
import type { StreamRequest, StreamResult, StreamTransport, Subscription } from './transport.ts';

/** The most the client holds of one event, in characters (the server's own cap on one result is 16 MiB by default). */
export const MAX_EVENT_CHARS = 32 * 1024 * 1024;

export interface SseOptions {
  url: string;
  headers: Record<string, string>;
  fetch: typeof fetch;
}

export function sseTransport({ url, headers, fetch }: SseOptions): StreamTransport {
  return {
    subscribe: (request) => sseSubscription(request, { url, headers, fetch }),
    close: async () => undefined,
  };
}

function sseSubscription(request: StreamRequest, { url, headers, fetch }: SseOptions): Subscription {
  const abort = new AbortController();
  const signal = anySignal([request.signal, abort.signal]);
  // The decoder drops a BOM at the start of the body and keeps a character split across reads whole.
  const decoder = new TextDecoder();
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const frames: EventSourceMessage[] = [];
  let overflow: RunplaneError | undefined;
  let endsInCr = false;
  const tooLarge = () =>
    new RunplaneError('RESPONSE_TOO_LARGE', `an SSE event from ${url} was larger than the client takes (${MAX_EVENT_CHARS} characters)`);
  const parser = createParser({
    // Only GraphQL over SSE's events; `retry:` is ignored (the client's own reconnect policy
    // applies), and so are unknown fields and comments, as the SSE standard has it.
    onEvent: (event) => {
      // The parser's bound is checked after each read: an event that came whole in one larger read is caught here.
      if (event.data.length > MAX_EVENT_CHARS) overflow ??= tooLarge();
      else if (!overflow && (event.event === 'next' || event.event === 'complete')) frames.push(event);
    },
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow ??= tooLarge();
    },
    maxBufferSize: MAX_EVENT_CHARS,
  });

  async function open() {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...headers,
          ...(request.lastEventId ? { 'last-event-id': request.lastEventId } : {}),
        },
        body: JSON.stringify({ query: documentText(request.document), variables: request.variables }),
        signal,
      });
    } catch (err) {
      throw fromNetworkFailure(err, url);
    }
    if (!response.ok || !response.body || !/text\/event-stream/.test(response.headers.get('content-type') ?? '')) {
      throw await refusal(response, url);
    }
    request.onConnected();
    return response.body.getReader();
  }

  /** Reads until at least one whole event is in; false when the body ended. Events before an oversized one are still handed out. */
  async function fill(from: ReadableStreamDefaultReader<Uint8Array>) {
    while (frames.length === 0) {
      if (overflow) {
        void from.cancel().catch(() => undefined);
        throw overflow;
      }
      let chunk: Awaited<ReturnType<typeof from.read>>;
      try {
        chunk = await from.read();
      } catch (err) {
        throw fromNetworkFailure(err, url);
      }
      if (chunk.done) {
        // The parser holds back a CR that ends its input, in case an LF follows; at the end of
        // the body it was a line end (CR and CRLF mean the same), so the event it closed is in.
        if (endsInCr) parser.feed('\n');
        endsInCr = false;
        return frames.length > 0;
      }
      const text = decoder.decode(chunk.value, { stream: true });
      if (text) endsInCr = text.endsWith('\r');
      parser.feed(text);
    }
    return true;
  }

  return {
    async next(): Promise<IteratorResult<StreamResult, 'complete'>> {
      try {
        reader ??= await open();
        if (!(await fill(reader))) {
          // Ended without `complete`: the server is stopping or the connection was cut; come back.
          throw new RunplaneError(clientCodes.network, 'the server ended the event stream without completing it');
        }
      } catch (err) {
        if (request.signal.aborted) return { done: true, value: 'complete' };
        throw err;
      }
      const frame = frames.shift() as EventSourceMessage;
      if (frame.event === 'complete') return { done: true, value: 'complete' };
      const result = parseResult(frame.data, url);
      if (result.errors?.length || !result.data) throw fromGraphQLErrors(result.errors ?? []);
      return { done: false, value: { data: result.data, id: frame.id } };
    },
    async return() {
      abort.abort();
      await reader?.cancel().catch(() => undefined);
    },
  };
}

function parseResult(data: string, url: string) {
  try {
    return JSON.parse(data) as { data?: Record<string, unknown>; errors?: GraphQLErrorLike[] };
  } catch {
    throw new RunplaneError(clientCodes.badResponse, `${url} sent an SSE next event whose data is not JSON`);
  }
}

/** A response that is not an event stream: the server's GraphQL errors when it sent some. */
async function refusal(response: Response, url: string) {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { errors?: GraphQLErrorLike[] };
    if (body.errors?.length) return fromGraphQLErrors(body.errors, response.status);
  } catch {
    // Not JSON: said below.
  }
  return new RunplaneError(clientCodes.badResponse, `${url} answered ${response.status} instead of an event stream`, {
    retryable: [502, 503, 504].includes(response.status),
    status: response.status,
  });
}
