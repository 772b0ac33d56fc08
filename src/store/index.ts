/** The stores: one per aggregate, each doing its conditional writes; built together on one idempotency record set. */
import { type BudgetStore, createBudgetStore } from './budgets.ts';
import type { StoreDeps } from './deps.ts';
import { createEventStore, type EventStore } from './events/index.ts';
import { createIdempotency } from './idempotency.ts';
import { createLeaseStore, type LeaseStore } from './leases/index.ts';
import { createRunStore, type RunStore } from './runs/index.ts';
import { createRunListing, type RunListing } from './runs/list.ts';

export type { ReadBudget, Retention, StoreDeps } from './deps.ts';
export type { IdempotencyKey } from './idempotency.ts';
export type { BudgetStore, EventStore, LeaseStore, RunListing, RunStore };

export interface Stores {
  runs: RunStore;
  runList: RunListing;
  events: EventStore;
  budgets: BudgetStore;
  leases: LeaseStore;
}

export function createStores(deps: StoreDeps): Stores {
  const idempotency = createIdempotency(deps, deps.retention.idempotencySeconds);
  return {
    runs: createRunStore(deps, idempotency),
    runList: createRunListing(deps),
    events: createEventStore(deps, idempotency),
    budgets: createBudgetStore(deps, idempotency),
    leases: createLeaseStore(deps, idempotency),
  };
}
