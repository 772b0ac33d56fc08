/**
 * runsChanged when the read that completes a change is slow: the stream's copy of the change
 * being completed arrives meanwhile, and must not be sent a second time.
 */

import type { Engine } from '@runplane/engine';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { topics } from '../../src/streams/changes.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

interface RunSeen {
  id: string;
  version: number;
  budget: { version: number };
}

describe.skipIf(onlyEmbedded)('runsChanged with a slow read', () => {
  let engine: Engine;
  let api: TestServer;
  let client: Client;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    api = await startTestServer({ endpoint: engine.endpoint, stopAfterAll: false });
    client = wsClient(api.url);
  });
  afterAll(async () => {
    await client.dispose();
    await api.server.stop();
    await engine.close();
  });

  test("a run's change is sent once though its stream copy arrives while its budget is read", async () => {
    const seen = subscribeWs<RunSeen>(client, 'subscription { runsChanged { id version budget { version } } }', {}, 'runsChanged');
    await waitFor(() => api.server.live.hub.listenersOf(topics.runs(OPEN_TENANT)) >= 1, { what: 'the subscriber' });
    const slowRun = await newRun(api, { budgetCap: 5 });
    await waitFor(() => seen.items.some((r) => r.id === slowRun), { what: 'the new run' });

    // The transition changes the run alone: its budget is read to complete it, slowly, while the poller brings the stream's copy.
    {
      using _slow = engine.faults.inject({ operations: ['GetItem'], latencyMs: 1_500 });
      await api.gql(`mutation { transitionRun(input: { runId: "${slowRun}", from: RUNNING, to: COMPLETED }) { __typename } }`);
      await waitFor(() => seen.items.some((r) => r.id === slowRun && r.version === 2), { what: 'the transition' });
      // Another run's change, sent after anything still waiting for the first run.
      const laterRun = await newRun(api, { budgetCap: 5 });
      await waitFor(() => seen.items.some((r) => r.id === laterRun), { what: 'the later run' });
    }
    const versions = seen.items.filter((r) => r.id === slowRun).map((r) => `${r.version}.${r.budget.version}`);
    expect(versions).toEqual(['1.1', '2.1']);
    seen.stop();
  }, 120_000);
});
