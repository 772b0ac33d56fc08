/** The client's new API against a real server: approvals, the listings, and the tenant-wide streams. */
import { expect, test } from 'vitest';
import { topics } from '../../src/streams/changes.ts';
import { uniqueName } from '../support/aws.ts';
import { testClient } from '../support/client.ts';
import { startTestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

test.each(['ws', 'sse'] as const)(
  'over %s: runsChanged and leasesChanged follow the tenant; runs and leases list it; approvals answer their unions',
  async (transport) => {
    const api = await startTestServer();
    const { client } = testClient(api.url, { transport });
    const runs: string[] = [];
    const leases: string[] = [];
    const stop = new AbortController();
    void (async () => {
      for await (const run of client.runsChanged({ signal: stop.signal })) runs.push(`${run.id}:${run.status}`);
    })();
    void (async () => {
      for await (const lease of client.leasesChanged({ signal: stop.signal })) leases.push(`${lease.unitId}:${lease.owner}`);
    })();
    await waitFor(() => api.server.live.hub.listenersOf(topics.runs('default')) === 1, { what: 'runsChanged' });
    await waitFor(() => api.server.live.hub.listenersOf(topics.leases('default')) === 1, { what: 'leasesChanged' });

    const id = uniqueName('run');
    await client.createRun({ id, task: 'pay', budgetCap: 10 });
    expect(await client.requestApproval({ runId: id, request: { amount: 5 } })).toMatchObject({
      __typename: 'Run',
      status: 'AWAITING_APPROVAL',
    });
    const resolved = await client.resolveApproval({ runId: id, approve: true, by: 'ana' });
    expect(resolved).toMatchObject({ __typename: 'Run', status: 'RUNNING', version: 3 });
    expect(await client.resolveApproval({ runId: id, approve: true, by: 'bo' })).toMatchObject({
      __typename: 'StatusConflict',
      current: 'RUNNING',
    });
    await waitFor(() => runs.includes(`${id}:RUNNING`) && runs.includes(`${id}:AWAITING_APPROVAL`), {
      what: `the run's changes (${runs})`,
    });

    const unitId = uniqueName('unit');
    await client.acquireLease({ unitId, owner: 'w1', ttlSeconds: 60 });
    await waitFor(() => leases.includes(`${unitId}:w1`), { what: 'the lease change' });
    await waitFor(async () => (await client.leases({ held: true })).edges.some((e) => e.node.unitId === unitId), { what: 'the listing' });
    await waitFor(async () => (await client.runs({ status: 'RUNNING' })).edges.some((e) => e.node.id === id), { what: 'the run listed' });
    stop.abort();
  },
);
