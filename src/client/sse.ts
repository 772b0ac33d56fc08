/**
 * Subscriptions over SSE (GraphQL over SSE, distinct connections: one response each). Written
 * by hand rather than with graphql-sse's client: the body is read only as the consumer asks
 * (back-pressure reaches the server through TCP), a stream that ends without `complete` (a
 * server stopping, a connection cut) is told apart from one that really ended, and each
 * resubscription carries its own resume point (afterSeq, Last-Event-ID).
 */

import { clientCodes, fromGraphQLErrors, fromNetworkFailure, type GraphQLErrorLike, RunplaneError } from './errors.ts';
import { documentText } from './graphql.ts';
import { anySignal } from './signals.ts';
import type { StreamRequest, StreamResult, StreamTransport, Subscription } from './transport.ts';

/** The largest frame taken (the server's own cap on one result is 16 MiB by default). */
const MAX_FRAME_CHARS = 32 * 1024 * 1024;

export interface SseOptions {
  url: string;
  headers: Record<string, string>;
  fetch: typeof fetch;
}

interface Frame {
  event: string;
  id?: string;
  data: string;
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
  const decoder = new TextDecoder();
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let buffer = '';
  const frames: Frame[] = [];

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

  /** Reads until at least one whole frame is in; false when the body ended. */
  async function fill(from: ReadableStreamDefaultReader<Uint8Array>) {
    while (frames.length === 0) {
      let chunk: Awaited<ReturnType<typeof from.read>>;
      try {
        chunk = await from.read();
      } catch (err) {
        throw fromNetworkFailure(err, url);
      }
      if (chunk.done) return false;
      buffer += decoder.decode(chunk.value, { stream: true });
      // One pass over the chunk's frames; the unfinished rest is kept once (not re-copied per frame).
      let start = 0;
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n', start)) {
        const frame = parseFrame(buffer.slice(start, end));
        start = end + 2;
        if (frame) frames.push(frame);
      }
      buffer = buffer.slice(start);
      if (buffer.length > MAX_FRAME_CHARS) throw new RunplaneError('RESPONSE_TOO_LARGE', 'an SSE frame was larger than the client takes');
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
      const frame = frames.shift() as Frame;
      if (frame.event === 'complete') return { done: true, value: 'complete' };
      const result = JSON.parse(frame.data) as { data?: Record<string, unknown>; errors?: GraphQLErrorLike[] };
      if (result.errors?.length || !result.data) throw fromGraphQLErrors(result.errors ?? []);
      return { done: false, value: { data: result.data, id: frame.id } };
    },
    async return() {
      abort.abort();
      await reader?.cancel().catch(() => undefined);
    },
  };
}

function parseFrame(text: string): Frame | undefined {
  const frame: Frame = { event: 'message', data: '' };
  const data: string[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') frame.event = value;
    else if (field === 'id') frame.id = value;
    else if (field === 'data') data.push(value);
  }
  frame.data = data.join('\n');
  return frame.event === 'next' || frame.event === 'complete' ? frame : undefined;
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
