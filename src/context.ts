/** One context for every request, over HTTP, WebSocket or SSE. */
import type { Role } from './auth.ts';
import type { Budget, Lease, Run, RunEvent } from './domain/run.ts';
import type { BudgetStore } from './store/budgets.ts';
import type { EventStore } from './store/events.ts';
import type { LeaseStore } from './store/leases.ts';
import type { RunListing } from './store/run-list.ts';
import type { RunStore } from './store/runs.ts';

export interface Stores {
  runs: RunStore;
  runList: RunListing;
  events: EventStore;
  budgets: BudgetStore;
  leases: LeaseStore;
}

export interface Limits {
  /** Largest event payload accepted, as UTF-8 JSON bytes. */
  maxPayloadBytes: number;
}

/** Subscriptions: ordered, deduplicated feeds of changes. */
export interface LiveFeeds {
  runEvents(tenant: string, runId: string, afterSeq?: number, types?: readonly string[]): AsyncIterableIterator<RunEvent>;
  runChanged(tenant: string, runId: string): AsyncIterableIterator<{ run: Run; budget: Budget | null }>;
  leaseChanged(tenant: string, unitId: string): AsyncIterableIterator<Lease>;
}

export interface Context {
  /** Whose rows this request may see: every key it builds starts with it. */
  tenant: string;
  /** What its API key allows (read-only keys cannot run mutations). */
  role: Role;
  stores: Stores;
  live: LiveFeeds;
  limits: Limits;
}
