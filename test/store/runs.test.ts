/**
 * Runs at the store: what a transition answers when the run is gone by the time it is read
 * back, and where the background work of a finished run reports its failures.
 */
import { describe, expect, test } from 'vitest';
import { RunNotFound } from '../../src/domain/errors.ts';
import type { Logger } from '../../src/lib/logger.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newStoredRun, storesOnFreshTable, TENANT } from './fixture.ts';

describe('transitions', () => {
  test('a finishing run gone when read back (retention 0) is RunNotFound, never a run decoded from nothing', async () => {
    const { stores } = await storesOnFreshTable({ retention: { finishedRunSeconds: 0 } });
    const plain = await newStoredRun(stores);
    await expect(stores.runs.transition({ tenant: TENANT, runId: plain, from: 'RUNNING', to: 'COMPLETED' })).rejects.toBeInstanceOf(
      RunNotFound,
    );
    const keyed = await newStoredRun(stores);
    const input = { tenant: TENANT, runId: keyed, from: 'RUNNING' as const, to: 'FAILED' as const };
    await expect(
      stores.runs.transition(input, { tenant: TENANT, key: `k-${keyed}`, operation: 'transitionRun', request: input }),
    ).rejects.toBeInstanceOf(RunNotFound);
  });

  test('a run that is not finishing is answered from its own update, without reading it back', async () => {
    const { stores, sentDuring } = await storesOnFreshTable();
    const runId = await newStoredRun(stores);
    let run: unknown;
    const sent = await sentDuring(async () => {
      run = await stores.runs.transition({ tenant: TENANT, runId, from: 'RUNNING', to: 'WAITING_FOR_TOOL' });
    });
    expect(sent).toEqual(['UpdateItemCommand']);
    expect(run).toMatchObject({ id: runId, status: 'WAITING_FOR_TOOL', version: 2 });
  });
});

describe.skipIf(onlyEmbedded)('a finished run', () => {
  test("a failure giving its events their TTL goes to the store's logger, naming the run", async () => {
    const { engine } = await ownEngine();
    try {
      const errors: string[] = [];
      const log: Logger = { info: () => {}, warn: () => {}, error: (message) => errors.push(message) };
      const { stores } = await storesOnFreshTable({ endpoint: engine.endpoint, log, maxAttempts: 1 });
      const runId = await newStoredRun(stores);
      await stores.events.append({ tenant: TENANT, runId, type: 'step', payload: null });
      // The transition is one transaction; the events' TTL is set afterwards, starting with a Query of them.
      using _ = engine.faults.inject({ operations: ['Query'], error: 'InternalServerError', times: 1 });
      await stores.runs.transition({ tenant: TENANT, runId, from: 'RUNNING', to: 'COMPLETED' });
      await stores.runs.settled();
      expect(errors).toEqual([`giving the events of finished run ${runId} their TTL failed`]);
    } finally {
      await engine.close();
    }
  });
});
