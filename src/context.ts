/** One context for every request, over HTTP, WebSocket or SSE. */
import type { BudgetStore } from './store/budgets.ts';
import type { EventStore } from './store/events.ts';
import type { LeaseStore } from './store/leases.ts';
import type { RunStore } from './store/runs.ts';

export interface Stores {
  runs: RunStore;
  events: EventStore;
  budgets: BudgetStore;
  leases: LeaseStore;
}

export interface Limits {
  /** Largest event payload accepted, as UTF-8 JSON bytes. */
  maxPayloadBytes: number;
}

export interface Context {
  /** Whose rows this request may see: every key it builds starts with it. */
  tenant: string;
  stores: Stores;
  limits: Limits;
}
