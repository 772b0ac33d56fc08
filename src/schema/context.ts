/** One context for every request, over HTTP, WebSocket or SSE. */

import type { Limits } from '../domain/limits.ts';
import type { Role } from '../domain/principal.ts';
import type { Budget, DeliveredEvent, Lease, Run, RunClaim, RunStatus } from '../domain/run.ts';
import type { ReadBudget, Stores } from '../store/index.ts';
import type { SendBudget } from '../streams/send-budget.ts';

export interface RunEventsQuery {
  tenant: string;
  runId: string;
  /** Replay from the table after this seq, then live; absent: live from now. */
  afterSeq?: number;
  types?: readonly string[];
  /** The subscriber's connection's send budget. */
  budget?: SendBudget;
}

/** Subscriptions: ordered, deduplicated feeds of changes. */
export interface LiveFeeds {
  runEvents(query: RunEventsQuery): AsyncIterableIterator<DeliveredEvent>;
  runChanged(query: {
    tenant: string;
    runId: string;
    budget?: SendBudget;
    seen?: { run: number; budget: number; claim?: number };
  }): AsyncIterableIterator<{ run: Run; budget: Budget | null; claim: RunClaim | null }>;
  leaseChanged(query: { tenant: string; unitId: string; budget?: SendBudget; seen?: number }): AsyncIterableIterator<Lease>;
  /** Every run of the tenant that changes. */
  runsChanged(query: {
    tenant: string;
    status?: RunStatus;
    budget?: SendBudget;
  }): AsyncIterableIterator<{ run: Run; budget: Budget | null }>;
  leasesChanged(query: { tenant: string; budget?: SendBudget }): AsyncIterableIterator<Lease>;
}

export interface Context {
  /** Whose rows this request may see: every key it builds starts with it. */
  tenant: string;
  /** What its API key allows (read-only keys cannot run mutations). */
  role: Role;
  stores: Stores;
  live: LiveFeeds;
  limits: Limits;
  /** What this request may still read for its response (RUNPLANE_MAX_RESPONSE_BYTES). */
  response: ReadBudget;
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
  budget: SendBudget;
  /** SSE: the id of the last event the client got before reconnecting (Last-Event-ID). */
  lastEventId?: string;
}
