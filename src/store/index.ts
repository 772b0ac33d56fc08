/** The stores: one per aggregate, each doing its conditional writes; built together on one idempotency record set. */
import { type BudgetStore, createBudgetStore } from './budgets.ts';
import type { StoreDeps } from './deps.ts';
import { createEventStore, type EventStore } from './events/index.ts';
import { createIdempotency } from './idempotency.ts';
import { createLeaseStore, type LeaseStore } from './leases/index.ts';
import { createLeaseListing, type LeaseListing } from './leases/list.ts';
import { createOutputStore, type OutputStore } from './outputs/chunks.ts';
import { createRunStore, type RunStore } from './runs/index.ts';
import { createRunListing, type RunListing } from './runs/list.ts';

export type { ResponseLimit, Retention, StoreDeps } from './deps.ts';
export type { IdempotencyKey } from './idempotency.ts';
export { ReadShares } from './read-shares.ts';
export { RequestReads, type TableReads } from './reads.ts';
export type { BudgetStore, EventStore, LeaseListing, LeaseStore, OutputStore, RunListing, RunStore };

export interface Stores {
  runs: RunStore;
  runList: RunListing;
  events: EventStore;
  budgets: BudgetStore;
  leases: LeaseStore;
  leaseList: LeaseListing;
  outputs: OutputStore;
}

export function createStores(deps: StoreDeps): Stores {
  const idempotency = createIdempotency(deps, deps.retention.idempotencySeconds);
  const events = createEventStore(deps, idempotency);
  return {
    runs: createRunStore(deps, idempotency, events),
    runList: createRunListing(deps),
    events,
    budgets: createBudgetStore(deps, idempotency),
    leases: createLeaseStore(deps, idempotency),
    leaseList: createLeaseListing(deps),
    outputs: createOutputStore(deps),
  };
}
