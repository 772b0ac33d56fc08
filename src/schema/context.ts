/** One context for every request, over HTTP, WebSocket or SSE. */

import type { Limits } from '../domain/limits.ts';
import type { OutputChunk } from '../domain/output.ts';
import type { Role } from '../domain/principal.ts';
import type { Budget, DeliveredEvent, Lease, Run, RunClaim, RunStatus } from '../domain/run.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import type { RequestReads, ResponseLimit, Stores } from '../store/index.ts';
import type { OutputWriter } from '../store/outputs/writer.ts';
import type { RunEventsQuery, RunOutputQuery } from '../streams/live.ts';

export type { RunEventsQuery };

/** Subscriptions: ordered, deduplicated feeds of changes. */
export interface LiveFeeds {
  runEvents(query: RunEventsQuery): AsyncIterableIterator<DeliveredEvent>;
  runChanged(query: {
    tenant: string;
    runId: string;
    sendBuffer?: SendBuffer;
    seen?: { run: number; budget: number; claim?: number };
  }): AsyncIterableIterator<{ run: Run; budget: Budget | null; claim: RunClaim | null }>;
  leaseChanged(query: { tenant: string; unitId: string; sendBuffer?: SendBuffer; seen?: number }): AsyncIterableIterator<Lease>;
  /** Every run of the tenant that changes. */
  runsChanged(query: {
    tenant: string;
    status?: RunStatus;
    sendBuffer?: SendBuffer;
  }): AsyncIterableIterator<{ run: Run; budget: Budget | null }>;
  leasesChanged(query: { tenant: string; sendBuffer?: SendBuffer }): AsyncIterableIterator<Lease>;
  runOutput(query: RunOutputQuery): AsyncIterableIterator<OutputChunk>;
}

/** Live output's writing side (store/outputs/writer.ts). */
export type OutputWriting = Pick<OutputWriter, 'append' | 'streamsOf'>;

export interface Context {
  /** Whose rows this request may see: every key it builds starts with it. */
  tenant: string;
  /** What its API key allows (read-only keys cannot run mutations). */
  role: Role;
  stores: Stores;
  live: LiveFeeds;
  output: OutputWriting;
  limits: Limits;
  /** What this request may still read for its response (RUNPLANE_MAX_RESPONSE_BYTES). */
  response: ResponseLimit;
  /** What this request may still read of the table (RUNPLANE_MAX_REQUEST_READS), within its tenant's share of reads in flight. */
  reads: RequestReads;
  /** The API key it presented (revoking the key ends its streams). */
  keyId: string;
  /** The key's name: what the server records as who decided (approvals, cancellations). */
  keyName: string;
  /** The connection this operation came on. */
  connection: Connection;
}

/** What one operation is served on. */
export interface Connection {
  transport: 'http' | 'ws';
  /** The client's address. */
  address: string;
  /** What the connection's subscriptions may hold (events queued, frames unsent). */
  sendBuffer: SendBuffer;
  /** SSE: the id of the last event the client got before reconnecting (Last-Event-ID). */
  lastEventId?: string;
}
