/**
 * withRun against a real server, over WebSocket and SSE: the function's writes carry the
 * claim's token; a cancellation from another key aborts its signal and its next write is
 * refused; another worker taking the run over aborts it too; the claim is released when the
 * function returns or throws; a worker that waits too long is told who holds the run.
 */
import { RunplaneError } from 'runplane/client';
import { beforeAll, describe, expect, test } from 'vitest';
import { testClient } from '../support/client.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const WORKER = 'worker-key-0123456789abcdef';
const OPS = 'ops-key-0123456789abcdef';
let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_API_KEYS: `${WORKER}=acme:write:worker,${OPS}=acme:write:ops` });
});

describe.each(['ws', 'sse'] as const)('over %s', (transport) => {
  test('writes carry the token; a cancellation from another key aborts the signal, and the next write is refused', async () => {
    const runId = await newRun(api, { key: WORKER });
    const { client: worker } = testClient(api.url, { apiKey: WORKER, transport });
    const { client: ops } = testClient(api.url, { apiKey: OPS, transport });
    let signalled: unknown;
    let refused: unknown;
    const working = worker.withRun({ runId, holder: 'w1', ttlSeconds: 30 }, async (run, signal) => {
      expect(await run.append({ type: 'step', payload: 1 })).toMatchObject({ __typename: 'Event', seq: 1 });
      expect(await run.charge(5)).toMatchObject({ __typename: 'Budget', spent: 5 });
      const cancelled = await ops.cancelRun({ runId, reason: 'enough' });
      expect(cancelled).toMatchObject({ __typename: 'Run', status: 'CANCELLED' });
      await waitFor(() => signal.aborted, { what: 'the worker to be told' });
      signalled = signal.reason;
      // It goes on anyway: the server refuses what it writes.
      refused = await run.append({ type: 'late' });
      return 'done';
    });
    const failure = await working.catch((err) => err);
    expect(failure).toBeInstanceOf(RunplaneError);
    expect(failure.code).toBe('RUN_CANCELLED');
    expect((signalled as RunplaneError).code).toBe('RUN_CANCELLED');
    expect(refused).toMatchObject({ __typename: 'ClaimLost' });
    const { data } = await api.gql(`{ run(id: "${runId}", consistent: true) { status lastSeq } }`, {}, { key: OPS });
    expect(data.run).toEqual({ status: 'CANCELLED', lastSeq: 2 });
  });

  test('a function that finishes its run itself and works on past the claim`s TTL is not told it lost the claim', async () => {
    const runId = await newRun(api, { key: WORKER });
    const { client: worker } = testClient(api.url, { apiKey: WORKER, transport });
    const result = await worker.withRun({ runId, holder: 'w1', ttlSeconds: 1 }, async (run, signal) => {
      expect(await run.transition({ from: 'RUNNING', to: 'COMPLETED' })).toMatchObject({ __typename: 'Run', status: 'COMPLETED' });
      // Work after the run's end (a summary, a cleanup), longer than the claim would have lasted.
      const completedAt = Date.now();
      await waitFor(() => Date.now() - completedAt > 1_500, { what: 'the work after the run finished' });
      expect(signal.aborted).toBe(false);
      return 'summarised';
    });
    expect(result).toBe('summarised');
  });

  test('a cancel that lands while the function`s own finishing transition is on its way still aborts the signal', async () => {
    const runId = await newRun(api, { key: WORKER });
    const { client: ops } = testClient(api.url, { apiKey: OPS, transport });
    let signal: AbortSignal | undefined;
    // The worker's finishing transition waits on its way until the cancel has reached the worker.
    const slowFinish: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string' && init.body.includes('TransitionRun')) {
        expect(await ops.cancelRun({ runId, reason: 'stop' })).toMatchObject({ __typename: 'Run', status: 'CANCELLED' });
        await waitFor(() => signal?.aborted === true, { what: 'the cancel to reach the worker' });
      }
      return fetch(input, init);
    };
    const { client: worker } = testClient(api.url, { apiKey: WORKER, transport, fetch: slowFinish });
    const failure = await worker
      .withRun({ runId, holder: 'w1', ttlSeconds: 30 }, async (run, given) => {
        signal = given;
        await run.transition({ from: 'RUNNING', to: 'COMPLETED' });
        return 'finished';
      })
      .catch((err) => err);
    expect(failure).toBeInstanceOf(RunplaneError);
    expect(failure.code).toBe('RUN_CANCELLED');
  });

  test('a claim that cannot be renewed aborts the signal before it runs out; a takeover then refuses the first worker`s writes', async () => {
    const runId = await newRun(api, { key: WORKER });
    // This worker's renewals never get through (a network that drops them): its claim runs out.
    const stalling: typeof fetch = (input, init) => {
      if (typeof init?.body === 'string' && init.body.includes('RenewRunClaim'))
        return new Promise((_, reject) => init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }));
      return fetch(input, init);
    };
    const { client: first } = testClient(api.url, { apiKey: WORKER, transport, fetch: stalling });
    const { client: second } = testClient(api.url, { apiKey: WORKER, transport });
    let lateWrite: unknown;
    const failure = await first
      .withRun({ runId, holder: 'slow', ttlSeconds: 1 }, async (run, signal) => {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        expect((signal.reason as RunplaneError).code).toBe('CLAIM_LOST');
        await waitFor(async () => (await second.claimRun({ runId, holder: 'fresh', ttlSeconds: 30 })).__typename === 'RunClaim', {
          what: 'the second worker to take the run',
        });
        // The first wakes up and writes: refused, the run is the second's.
        lateWrite = await run.append({ type: 'late' });
      })
      .catch((err) => err);
    expect(failure).toBeInstanceOf(RunplaneError);
    expect(failure.code).toBe('CLAIM_LOST');
    expect(lateWrite).toMatchObject({ __typename: 'ClaimLost', currentHolder: 'fresh' });
  });

  test('the claim is released when the function returns or throws; a worker that waits too long is told who holds it', async () => {
    const runId = await newRun(api, { key: WORKER });
    const { client } = testClient(api.url, { apiKey: WORKER, transport });
    expect(await client.withRun({ runId, holder: 'a', ttlSeconds: 600 }, async (run) => run.claim.holder)).toBe('a');
    expect((await client.run(runId, { consistent: true }))?.claim).toBeNull();
    const thrown = await client
      .withRun({ runId, holder: 'b', ttlSeconds: 600 }, async () => {
        throw new Error('the work failed');
      })
      .catch((err) => err);
    expect(thrown).toEqual(new Error('the work failed'));
    expect((await client.run(runId, { consistent: true }))?.claim).toBeNull();
    await client.claimRun({ runId, holder: 'c', ttlSeconds: 600 });
    const held = await client.withRun({ runId, holder: 'd', ttlSeconds: 5, waitMs: 300 }, async () => 'never').catch((err) => err);
    expect(held).toMatchObject({ code: 'RUN_HELD', details: { holder: 'c' } });
  });
});
