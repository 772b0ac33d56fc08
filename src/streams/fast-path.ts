/**
 * The fast path: a change made through this server is published to its subscribers as
 * soon as DynamoDB has accepted it, without waiting for the stream (which still brings
 * the same change, and every other writer's, a moment later; feeds drop the copy).
 */

import type { Lease, Run, RunClaim, RunEvent } from '../domain/run.ts';
import type { Stores } from '../store/index.ts';
import type { Change } from './changes.ts';

/** @param publish to this server's subscribers (and, with replicas, to the others' through Redis) */
export function withFastPath(stores: Stores, publish: (change: Change) => void): Stores {
  const hub = { publish };
  const lease = (tenant: string, unitId: string, value: Lease) => {
    hub.publish({ kind: 'lease', tenant, unitId, lease: value });
    return value;
  };
  /** What a claim or a step of the server's own changed: the run, its event, its claim. */
  const stepped = <T extends { run?: Run; event?: RunEvent; claim?: RunClaim | null }>(tenant: string, runId: string, result: T) => {
    if (result.run) hub.publish({ kind: 'run', tenant, runId, run: result.run });
    if (result.event) hub.publish({ kind: 'event', tenant, runId, event: result.event });
    if (result.claim) hub.publish({ kind: 'claim', tenant, runId, claim: result.claim });
    return result;
  };
  return {
    runList: stores.runList,
    leaseList: stores.leaseList,
    runs: {
      ...stores.runs,
      async create(input, idem) {
        const created = await stores.runs.create(input, idem);
        hub.publish({ kind: 'run', tenant: input.tenant, runId: created.run.id, run: created.run });
        hub.publish({ kind: 'budget', tenant: input.tenant, runId: created.run.id, budget: created.budget });
        return created;
      },
      async decide(input, idem) {
        const result = await stores.runs.decide(input, idem);
        hub.publish({ kind: 'run', tenant: input.tenant, runId: input.runId, run: result.run });
        hub.publish({ kind: 'event', tenant: input.tenant, runId: input.runId, event: result.event });
        return result;
      },
      async transition(input, idem) {
        const run = await stores.runs.transition(input, idem);
        hub.publish({ kind: 'run', tenant: input.tenant, runId: input.runId, run });
        return run;
      },
      claim: async (input, idem) => stepped(input.tenant, input.runId, await stores.runs.claim(input, idem)),
      renewClaim: async (input) => stepped(input.tenant, input.runId, { claim: await stores.runs.renewClaim(input) }).claim,
      releaseClaim: async (input) => stepped(input.tenant, input.runId, { claim: await stores.runs.releaseClaim(input) }).claim,
      cancel: async (input, idem) => stepped(input.tenant, input.runId, await stores.runs.cancel(input, idem)),
      async stall(tenant, runId, expired) {
        const result = await stores.runs.stall(tenant, runId, expired);
        return result && stepped(tenant, runId, result);
      },
    },
    events: {
      ...stores.events,
      async append(input, idem) {
        const event = await stores.events.append(input, idem);
        hub.publish({ kind: 'event', tenant: input.tenant, runId: input.runId, event });
        return event;
      },
    },
    budgets: {
      ...stores.budgets,
      async charge(input, idem) {
        const budget = await stores.budgets.charge(input, idem);
        hub.publish({ kind: 'budget', tenant: input.tenant, runId: input.runId, budget });
        return budget;
      },
    },
    leases: {
      ...stores.leases,
      acquire: async (input, idem) => lease(input.tenant, input.unitId, await stores.leases.acquire(input, idem)),
      renew: async (input, idem) => lease(input.tenant, input.unitId, await stores.leases.renew(input, idem)),
      release: async (input, idem) => lease(input.tenant, input.unitId, await stores.leases.release(input, idem)),
    },
  };
}
