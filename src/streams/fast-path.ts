/**
 * The fast path: a change made through this server is published to its subscribers as
 * soon as DynamoDB has accepted it, without waiting for the stream (which still brings
 * the same change, and every other writer's, a moment later; feeds drop the copy).
 */
import type { Stores } from '../context.ts';
import type { Hub } from './hub.ts';

export function withFastPath(stores: Stores, hub: Hub): Stores {
  return {
    runs: {
      ...stores.runs,
      async create(input) {
        const created = await stores.runs.create(input);
        hub.publish({ kind: 'run', tenant: input.tenant, runId: input.id, run: created.run });
        hub.publish({ kind: 'budget', tenant: input.tenant, runId: input.id, budget: created.budget });
        return created;
      },
      async transition(input) {
        const run = await stores.runs.transition(input);
        hub.publish({ kind: 'run', tenant: input.tenant, runId: input.runId, run });
        return run;
      },
    },
    events: {
      ...stores.events,
      async append(input) {
        const event = await stores.events.append(input);
        hub.publish({ kind: 'event', tenant: input.tenant, runId: input.runId, event });
        return event;
      },
    },
    budgets: {
      ...stores.budgets,
      async charge(input) {
        const budget = await stores.budgets.charge(input);
        hub.publish({ kind: 'budget', tenant: input.tenant, runId: input.runId, budget });
        return budget;
      },
    },
    leases: {
      ...stores.leases,
      async acquire(input) {
        const lease = await stores.leases.acquire(input);
        hub.publish({ kind: 'lease', tenant: input.tenant, unitId: input.unitId, lease });
        return lease;
      },
    },
  };
}
