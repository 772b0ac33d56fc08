/**
 * The loop behind every stream: subscribe, hand results on, and when the subscription fails
 * or its consumer falls behind, subscribe again from where the stream stands, with back-off,
 * within the reconnect policy. Ends quietly when the caller's signal aborts.
 */
import { RunplaneError } from './errors.ts';
import type { Notice } from './notices.ts';
import type { QueuePolicy } from './queue.ts';
import { Attempts, type RetryPolicy, sleep } from './retry.ts';
import type { StreamRequest, StreamResult, StreamTransport } from './transport.ts';

/** A connection that stayed up this long before failing counts as a success: the failures are counted afresh. */
const STABLE_MS = 10_000;

export interface Resuming<Item> {
  stream: 'runEvents' | 'runChanged' | 'leaseChanged' | 'runsChanged' | 'leasesChanged' | 'runOutput';
  transport: StreamTransport;
  policy: QueuePolicy;
  reconnect: RetryPolicy;
  signal?: AbortSignal;
  onNotice: (notice: Notice) => void;
  /** The subscription to open now (it carries the stream's resume point). */
  request: () => Pick<StreamRequest, 'document' | 'variables' | 'lastEventId'>;
  /** Before the first subscription (runEvents reads where "now" is). */
  prepare?: () => Promise<void>;
  /** What to hand out for one result: a list (nothing, when it is old news), or items read on the way. */
  accept: (result: StreamResult) => AsyncIterable<Item> | readonly Item[];
  /** Before each resubscription: what to hand out first (runEvents looks for seqs it is owed). */
  resumed?: () => AsyncIterable<Item>;
  /** runEvents: the seq the next subscription resumes after, for notices. */
  afterSeq?: () => number;
}

export async function* resuming<Item>(options: Resuming<Item>): AsyncGenerator<Item, void, undefined> {
  const { signal } = options;
  const attempts = new Attempts(options.reconnect);
  const stopped = new AbortController();
  const stop = () => stopped.abort();
  signal?.addEventListener('abort', stop, { once: true });
  if (signal?.aborted) return;
  try {
    await options.prepare?.();
    for (let first = true; ; first = false) {
      if (!first && options.resumed) yield* options.resumed();
      let connectedAt: number | undefined;
      const subscription = options.transport.subscribe({
        ...options.request(),
        signal: stopped.signal,
        policy: options.policy,
        onConnected: () => {
          connectedAt = Date.now();
        },
      });
      let delayMs = 0;
      try {
        for (;;) {
          const result = await subscription.next();
          if (stopped.signal.aborted) return;
          if (result.done) {
            if (result.value === 'complete') return;
            // The consumer fell behind: what it has not read yet waits in the table.
            attempts.reset();
            options.onNotice({
              kind: 'reconnect',
              stream: options.stream,
              reason: 'backlog',
              attempt: 0,
              delayMs: 0,
              afterSeq: options.afterSeq?.(),
            });
            break;
          }
          attempts.reset();
          const items = options.accept(result.value);
          // The common case, a list, without an async iterator per result.
          if (Array.isArray(items)) for (const item of items) yield item;
          else yield* items;
        }
      } catch (err) {
        if (stopped.signal.aborted) return;
        if (!(err instanceof RunplaneError)) throw err;
        if (connectedAt !== undefined && Date.now() - connectedAt > STABLE_MS) attempts.reset();
        const delay = attempts.next(err);
        if (delay === undefined) throw err;
        delayMs = delay;
        options.onNotice({
          kind: 'reconnect',
          stream: options.stream,
          reason: 'error',
          attempt: attempts.count,
          delayMs,
          afterSeq: options.afterSeq?.(),
          error: err,
        });
      } finally {
        await subscription.return();
      }
      try {
        await sleep(delayMs, stopped.signal);
      } catch {
        return;
      }
    }
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
