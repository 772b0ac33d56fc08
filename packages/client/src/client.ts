/// <reference lib="esnext.disposable" preserve="true" />
/**
 * createRunplane: the client an agent, a worker or a dashboard holds. Mutations and queries go
 * over HTTP; streams over WebSocket or SSE, resuming by themselves.
 */
import { type Document, operationOf, type ResultOf, type ValidDocument, type VariablesOf } from './graphql.ts';
import { type HttpConnection, send } from './http.ts';
import { type LeaseContext, type LeaseOptions, withLease } from './lease.ts';
import { type CallOptions, createMutations, type Mutations } from './mutations.ts';
import type { Notice } from './notices.ts';
import { ListLeases, ListRuns, ReadLease, ReadRun, Viewer } from './operations.ts';
import { type OutputWriter, type OutputWriterOptions, outputWriter, type RunOutputOptions, runOutput } from './output.ts';
import { defaultReconnect, defaultRetry, type RetryPolicy } from './retry.ts';
import { type ClaimedRun, type RunClaimOptions, withRun } from './run-claim.ts';
import { type RunEvent, type RunEventsOptions, runEvents, type StreamDeps } from './run-events.ts';
import { sseTransport } from './sse.ts';
import { type LeaseState, leaseChanged, type RunState, runChanged, type StateStreamOptions } from './state-streams.ts';
import { leasesChanged, type RunsChangedState, runsChanged, type TenantStreamOptions } from './tenant-streams.ts';
import type { StreamTransport } from './transport.ts';
import { webSocketTransport } from './ws.ts';

/** Events a runEvents stream may hold for a consumer that is not reading; past this it reads on from the table later. */
export const DEFAULT_MAX_BUFFERED_EVENTS = 1_000;

export interface RunplaneOptions {
  /** The API's HTTP endpoint, e.g. `http://127.0.0.1:4000/graphql` (WebSocket: the same with ws://). */
  url: string;
  /** Sent as `Authorization: Bearer <key>` (WebSocket: in connection_init). */
  apiKey?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** A WebSocket constructor: the global one in browsers and Node 22+; on Node 20 pass `ws`'s. */
  webSocketImpl?: unknown;
  /** How streams travel. Default: 'ws' when a WebSocket constructor is at hand, else 'sse'. */
  transport?: 'ws' | 'sse';
  /** Retries of requests (mutations with their key, queries). */
  retry?: Partial<RetryPolicy>;
  /** Reconnects of streams, counted since the stream last made progress. */
  reconnect?: Partial<RetryPolicy>;
  /** One HTTP attempt's deadline (default 20 s). */
  requestTimeoutMs?: number;
  /** runEvents' bound between socket and consumer (default 1,000 events). */
  maxBufferedEvents?: number;
  /** Told of retries, reconnects and filled holes (for logs). */
  onNotice?: (notice: Notice) => void;
}

export type RunRead = NonNullable<ResultOf<typeof ReadRun>['run']>;
export type RunList = ResultOf<typeof ListRuns>['runs'];
export type LeaseList = ResultOf<typeof ListLeases>['leases'];
export type { LeaseState, RunEvent, RunState, RunsChangedState, TenantStreamOptions };

export interface PageOptions extends CallOptions {
  first?: number;
  after?: string;
}

export interface Runplane extends Mutations {
  /** A run with its budget and first events (`first`, default 50); null when there is none. */
  run(id: string, options?: CallOptions & { consistent?: boolean; first?: number }): Promise<RunRead | null>;
  /** Whose key this client holds, and whether it may write. */
  viewer(options?: CallOptions): Promise<ResultOf<typeof Viewer>['viewer']>;
  /** The tenant's runs, newest first (from an index: a run created a moment ago may show a moment later). */
  runs(options?: PageOptions & { status?: RunState['status'] }): Promise<RunList>;
  /** The tenant's units and their leases, by unit id; `held` true: live ones only, false: free ones only. */
  leases(options?: PageOptions & { held?: boolean }): Promise<LeaseList>;
  /** The live lease on a unit; null when it is free. */
  lease(unitId: string, options?: CallOptions): Promise<LeaseState | null>;
  /**
   * Any typed document (`graphql(...)`). Queries are retried; a mutation is sent once unless
   * `retry` is given (say so only when it carries an idempotency key).
   */
  request<D extends Document>(document: D & ValidDocument<D>, variables: VariablesOf<D>, options?: CallOptions): Promise<ResultOf<D>>;
  runEvents(runId: string, options?: RunEventsOptions): AsyncGenerator<RunEvent, void, undefined>;
  runChanged(runId: string, options?: StateStreamOptions): AsyncGenerator<RunState, void, undefined>;
  leaseChanged(unitId: string, options?: StateStreamOptions): AsyncGenerator<LeaseState, void, undefined>;
  /** Every run of the tenant as it changes (list first; list again on `onResubscribed`). */
  runsChanged(options?: TenantStreamOptions & { status?: RunState['status'] }): AsyncGenerator<RunsChangedState, void, undefined>;
  /** Every lease of the tenant as it changes. */
  leasesChanged(options?: TenantStreamOptions): AsyncGenerator<LeaseState, void, undefined>;
  /**
   * A writer of a run's output stream: `write(text)` batches (at most every `intervalMs`), keeps
   * offsets and sends again after a failure; `flush()` resolves once it is stored; `close()` ends it.
   */
  output(runId: string, stream: string, options?: OutputWriterOptions): OutputWriter;
  /** A run's output stream as text, from `afterOffset` (default 0), resuming across reconnects; ends after its final text. */
  runOutput(runId: string, stream: string, options?: RunOutputOptions): AsyncGenerator<string, void, undefined>;
  withLease<T>(options: LeaseOptions, fn: (context: LeaseContext) => Promise<T>): Promise<T>;
  /**
   * Works on a run while holding its claim: `run`'s writes carry the fencing token, `signal`
   * aborts when the run is cancelled, taken over or the claim is lost; released at the end.
   */
  withRun<T>(options: RunClaimOptions, fn: (run: ClaimedRun, signal: AbortSignal) => Promise<T>): Promise<T>;
  /** Closes the WebSocket (streams still open end with it). */
  close(): Promise<void>;
  /** `await using runplane = createRunplane(...)` closes it on the way out. */
  [Symbol.asyncDispose](): Promise<void>;
}

export function createRunplane(options: RunplaneOptions): Runplane {
  const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const http: HttpConnection = { url: options.url, headers, fetch: fetchImpl, requestTimeoutMs: options.requestTimeoutMs ?? 20_000 };
  const retry = { ...defaultRetry, ...options.retry };
  const onNotice = options.onNotice ?? (() => undefined);
  const webSocketImpl = options.webSocketImpl ?? (globalThis as { WebSocket?: unknown }).WebSocket;
  const kind = options.transport ?? (webSocketImpl ? 'ws' : 'sse');
  if (kind === 'ws' && !webSocketImpl) {
    throw new TypeError(
      "transport 'ws' needs a WebSocket: pass webSocketImpl (on Node 20, `import WebSocket from 'ws'`), or use transport 'sse'",
    );
  }
  const maxBuffered = options.maxBufferedEvents ?? DEFAULT_MAX_BUFFERED_EVENTS;
  let transport: StreamTransport | undefined;
  const deps: StreamDeps = {
    http,
    retry,
    reconnect: { ...defaultReconnect, ...options.reconnect },
    onNotice,
    // The socket is opened with the first stream, not before.
    transport: () => {
      transport ??=
        kind === 'ws'
          ? webSocketTransport({ url: options.url, apiKey: options.apiKey, webSocketImpl, maxBuffered, onNotice })
          : sseTransport({ url: options.url, headers, fetch: fetchImpl });
      return transport;
    },
  };
  const sendOptions = (call?: CallOptions, safe = true) => ({
    signal: call?.signal,
    retry: call?.retry === false || (!safe && !call?.retry) ? (false as const) : { ...retry, ...call?.retry },
    onNotice,
  });

  const mutations = createMutations(http, retry, onNotice);
  const close = async () => {
    await transport?.close();
  };
  return {
    ...mutations,
    async run(id, { consistent, first = 50, ...call } = {}) {
      return (await send(http, ReadRun, { id, consistent, first }, sendOptions(call))).run;
    },
    async viewer(call) {
      return (await send(http, Viewer, {}, sendOptions(call))).viewer;
    },
    async runs({ status, first, after, ...call } = {}) {
      return (await send(http, ListRuns, { status, first, after }, sendOptions(call))).runs;
    },
    async leases({ held, first, after, ...call } = {}) {
      return (await send(http, ListLeases, { held, first, after }, sendOptions(call))).leases;
    },
    async lease(unitId, call) {
      return (await send(http, ReadLease, { unitId }, sendOptions(call))).lease;
    },
    request: (document, variables, call) => send(http, document, variables, sendOptions(call, operationOf(document) === 'query')),
    runEvents: (runId, streamOptions) => runEvents(deps, runId, streamOptions),
    runChanged: (runId, streamOptions) => runChanged(deps, runId, streamOptions),
    leaseChanged: (unitId, streamOptions) => leaseChanged(deps, unitId, streamOptions),
    runsChanged: (streamOptions) => runsChanged(deps, streamOptions),
    leasesChanged: (streamOptions) => leasesChanged(deps, streamOptions),
    output: (runId, stream, writerOptions) => outputWriter(deps, runId, stream, writerOptions),
    runOutput: (runId, stream, streamOptions) => runOutput(deps, runId, stream, streamOptions),
    withLease: (leaseOptions, fn) => withLease(mutations, leaseOptions, fn),
    withRun: (runOptions, fn) =>
      withRun(
        {
          mutations,
          runChanged: (runId, { signal }) => runChanged(deps, runId, { signal }),
          output: (runId, stream, writerOptions) => outputWriter(deps, runId, stream, writerOptions),
        },
        runOptions,
        fn,
      ),
    close,
    [Symbol.asyncDispose]: close,
  };
}
