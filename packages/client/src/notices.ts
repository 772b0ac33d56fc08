/**
 * What the client tells a watcher (`onNotice`) about its own recovery: retries, reconnects,
 * holes it filled. Nothing here needs an answer; it is for logs and tests.
 */
import type { RunplaneError } from './errors.ts';

export interface SeqRange {
  from: number;
  to: number;
}

export type Notice =
  /** A request failed and is sent again (same idempotency key) after `delayMs`. */
  | { kind: 'retry'; operation: string; attempt: number; delayMs: number; error: RunplaneError }
  /**
   * A stream subscribes again after `delayMs`: its connection failed (`error`), or its consumer
   * fell `maxBufferedEvents` behind (`backlog`: it reads on from the table where it stopped).
   */
  | {
      kind: 'reconnect';
      stream: 'runEvents' | 'runChanged' | 'leaseChanged' | 'runsChanged' | 'leasesChanged' | 'runOutput';
      reason: 'error' | 'backlog';
      attempt: number;
      delayMs: number;
      /** runEvents: the last seq handed out, which the new subscription resumes after. */
      afterSeq?: number;
      error?: RunplaneError;
    }
  /** The WebSocket all streams share opened (the server acknowledged it) or closed (streams reconnect on their own). */
  | { kind: 'socket'; state: 'open' | 'closed' }
  /** runEvents found seqs missing from its feed and read them from the table; `missing` are still not there. */
  | { kind: 'gap'; runId: string; asked: SeqRange[]; found: number; missing: SeqRange[] };
