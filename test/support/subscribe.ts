/** Real subscription clients: graphql-ws over a WebSocket, and GraphQL over SSE with fetch. */
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { waitFor } from './wait.ts';

export interface Collected<T> {
  items: T[];
  /** The `extensions` of each result that had data, in order (undefined where it had none). */
  extensions: unknown[];
  errors: unknown[];
  /** The stream ended (for SSE: the response ended, with or without a `complete` event). */
  completed: boolean;
  /** The server said the subscription is over: a graphql-ws `complete`, or an SSE `event: complete`. */
  completeReceived: boolean;
  /** graphql-ws: the code the socket was closed with, if it was. */
  closeCode?: number;
  /** Waits until at least `count` items arrived (or fails after the deadline). */
  until(count: number, timeoutMs?: number): Promise<T[]>;
  stop(): void;
}

export function wsClient(httpUrl: string, options: { connectionParams?: Record<string, unknown> } = {}): Client {
  return createClient({
    url: httpUrl.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams: options.connectionParams,
    retryAttempts: 0,
    lazy: false,
    // A server going away is part of some tests: not an error to print.
    onNonLazyError: () => undefined,
  });
}

function collector<T>(stop: () => void): Collected<T> {
  const collected: Collected<T> = {
    items: [],
    extensions: [],
    errors: [],
    completed: false,
    completeReceived: false,
    async until(count, timeoutMs = 30_000) {
      await waitFor(() => collected.items.length >= count || collected.errors.length > 0, {
        timeoutMs,
        what: `${count} items (have ${collected.items.length})`,
      });
      if (collected.errors.length > 0) {
        const described = collected.errors.map((e) =>
          e instanceof Error
            ? { ...e, message: e.message }
            : e && typeof e === 'object' && 'code' in e
              ? { closed: (e as { code: number }).code, reason: (e as { reason?: string }).reason }
              : e,
        );
        throw new Error(`subscription failed: ${JSON.stringify(described)}`);
      }
      return collected.items;
    },
    stop,
  };
  return collected;
}

/** Subscribes over graphql-ws and collects `data[field]` of each result. */
export function subscribeWs<T>(client: Client, query: string, variables: Record<string, unknown>, field: string): Collected<T> {
  let dispose = () => {};
  const collected = collector<T>(() => dispose());
  dispose = client.subscribe<Record<string, T>>(
    { query, variables },
    {
      next: (result) => {
        if (result.errors) collected.errors.push(...result.errors);
        else if (result.data) {
          collected.items.push(result.data[field] as T);
          collected.extensions.push(result.extensions);
        }
      },
      error: (err) => {
        if (err && typeof err === 'object' && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
          collected.closeCode = (err as { code: number }).code;
        }
        collected.errors.push(err);
      },
      complete: () => {
        collected.completed = true;
        // graphql-ws also calls complete() after a lost socket's error; only a clean end counts.
        if (collected.closeCode === undefined) collected.completeReceived = true;
      },
    },
  );
  return collected;
}

/** Subscribes over GraphQL over SSE (one HTTP response per subscription) and collects `data[field]`. */
export function subscribeSse<T>(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  field: string,
  { key }: { key?: string } = {},
): Collected<T> {
  const abort = new AbortController();
  const collected = collector<T>(() => abort.abort());
  void (async () => {
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ query, variables }),
        signal: abort.signal,
      });
      if (!response.ok || !response.body)
        throw Object.assign(new Error(`HTTP ${response.status}: ${await response.text()}`), { status: response.status });
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (/^event: complete$/m.test(message)) collected.completeReceived = true;
          const data = message
            .split('\n')
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).trim())
            .join('\n');
          if (!data) continue;
          const result = JSON.parse(data) as { data?: Record<string, T>; errors?: unknown[]; extensions?: unknown };
          if (result.errors) collected.errors.push(...result.errors);
          else if (result.data) {
            collected.items.push(result.data[field] as T);
            collected.extensions.push(result.extensions);
          }
        }
      }
      collected.completed = true;
    } catch (err) {
      if (!abort.signal.aborted) collected.errors.push(err);
    }
  })();
  return collected;
}
