/** What the resuming streams need of a transport (WebSocket or SSE): one subscription at a time. */
import type { Document } from './graphql.ts';
import type { Ending, QueuePolicy } from './queue.ts';

export interface StreamRequest {
  document: Document;
  variables: Record<string, unknown>;
  /** SSE: sent as Last-Event-ID, so the server resumes after it. */
  lastEventId?: string;
  /** Ends the subscription (its next() then reports 'complete'). */
  signal: AbortSignal;
  /** The server accepted the connection. */
  onConnected: () => void;
  policy: QueuePolicy;
}

/** One result of a subscription: its data, and the SSE id when there is one. */
export interface StreamResult {
  data: Record<string, unknown>;
  id?: string;
}

/**
 * One subscription: results until the server completes it or the queue ends it ('backlog');
 * a failure is thrown as a RunplaneError. `return()` unsubscribes.
 */
export interface Subscription {
  next(): Promise<IteratorResult<StreamResult, Ending>>;
  return(): Promise<void>;
}

export interface StreamTransport {
  subscribe(request: StreamRequest): Subscription;
  /** A query or mutation sent on the stream's own connection (WebSocket); absent: it goes over HTTP. */
  execute?(document: Document, variables: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}
