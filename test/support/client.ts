/**
 * Runplane's own client (`runplane/client`, imported by its package name as a user would),
 * pointed at a test server; closed when the test that made it finishes. Counts the HTTP
 * requests it sends, by operation name, and keeps the notices it gives.
 */

import { createRunplane, type Notice, type Runplane, type RunplaneOptions } from 'runplane/client';
import { onTestFinished } from 'vitest';
import WebSocket from 'ws';

export interface TestClient {
  client: Runplane;
  notices: Notice[];
  /** HTTP requests sent so far, by operation name (`AppendEvent`, ...). */
  sent: string[];
}

export function testClient(url: string, options: Partial<RunplaneOptions> = {}): TestClient {
  const notices: Notice[] = [];
  const sent: string[] = [];
  const fetchImpl = options.fetch ?? fetch;
  const client = createRunplane({
    url,
    webSocketImpl: WebSocket,
    // Quick retries: tests wait on conditions, not on back-off.
    retry: { baseDelayMs: 20, maxDelayMs: 200 },
    reconnect: { baseDelayMs: 50, maxDelayMs: 500 },
    ...options,
    onNotice: (notice) => {
      notices.push(notice);
      options.onNotice?.(notice);
    },
    fetch: async (input, init) => {
      const body = typeof init?.body === 'string' ? init.body : '';
      const name = /^\s*(?:query|mutation|subscription)\s+(\w+)/.exec(JSON.parse(body || '{}').query ?? '')?.[1];
      sent.push(name ?? 'unnamed');
      return fetchImpl(input, init);
    },
  });
  // Per test, not a module-level afterEach: test files share this module (isolate: false), and
  // a hook registered on its import would belong to the first file that imported it only.
  onTestFinished(() => client.close());
  return { client, notices, sent };
}

/** Collects what an async iterable hands out, until `count` items or the deadline (in the background). */
export function collect<T>(iterable: AsyncIterable<T>) {
  const items: T[] = [];
  let failure: unknown;
  let ended = false;
  const done = (async () => {
    try {
      for await (const item of iterable) items.push(item);
    } catch (err) {
      failure = err;
    } finally {
      ended = true;
    }
  })();
  return {
    items,
    done,
    get failure() {
      return failure;
    },
    get ended() {
      return ended;
    },
  };
}
