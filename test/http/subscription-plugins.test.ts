/**
 * An envelop plugin added to the server sees every subscription event on its way to each
 * subscriber, over WebSocket and SSE alike, and what it makes of a result is what the client
 * gets: subscription delivery runs on envelop's hooks, not beside them.
 */

import { getOperationAST } from 'graphql';
import type { Client } from 'graphql-ws';
import type { Plugin } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

/** Per subscription, the results the plugin was handed, by the subscription's operation name. */
const seenBySubscriber = new Map<string, number>();
const executed: string[] = [];

const tracing: Plugin = {
  onExecute({ args }) {
    executed.push(getOperationAST(args.document, args.operationName)?.name?.value ?? 'anonymous');
  },
  onSubscribe({ args }) {
    const label = getOperationAST(args.document, args.operationName)?.name?.value ?? 'anonymous';
    return {
      onSubscribeResult() {
        return {
          onNext({ result, setResult }) {
            const n = (seenBySubscriber.get(label) ?? 0) + 1;
            seenBySubscriber.set(label, n);
            if ('data' in result) setResult({ ...result, extensions: { ...result.extensions, traced: { label, n } } });
          },
        };
      },
    };
  },
};

let api: TestServer;
let ws: Client;
beforeAll(async () => {
  api = await startTestServer({ plugins: [tracing] });
  ws = wsClient(api.url);
});
afterAll(async () => {
  await ws?.dispose();
});

const events = (label: string) => `subscription ${label}($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq } }`;

describe('a plugin on subscription delivery', () => {
  test('runs on every event for every subscriber, over WebSocket and SSE, and the client gets what it made', async () => {
    const runId = await newRun(api);
    const subscribers = {
      OverSocketA: subscribeWs<{ seq: number }>(ws, events('OverSocketA'), { runId }, 'runEvents'),
      OverSocketB: subscribeWs<{ seq: number }>(ws, events('OverSocketB'), { runId }, 'runEvents'),
      OverSse: subscribeSse<{ seq: number }>(api.url, events('OverSse'), { runId }, 'runEvents'),
    };
    for (let i = 0; i < 5; i++) await appendEvent(api, runId);
    for (const [label, collected] of Object.entries(subscribers)) {
      const items = await collected.until(5);
      expect(items.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5]);
      // Each result passed the plugin once, in order, and carries what the plugin put on it.
      expect(collected.extensions).toEqual([1, 2, 3, 4, 5].map((n) => ({ traced: { label, n } })));
      expect(seenBySubscriber.get(label)).toBe(5);
      collected.stop();
    }
  });

  test('runs on the other subscriptions too: their first state and each change', async () => {
    const runId = await newRun(api);
    const changed = subscribeWs<{ status: string }>(
      ws,
      'subscription RunChanged($runId: ID!) { runChanged(runId: $runId) { status } }',
      { runId },
      'runChanged',
    );
    await changed.until(1);
    const transitioned = await api.gql('mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }', {
      input: { runId, from: 'RUNNING', to: 'COMPLETED' },
    });
    expect(transitioned).toMatchObject({ data: { transitionRun: { __typename: 'Run' } } });
    const items = await changed.until(2);
    expect(items.map((run) => run.status)).toEqual(['RUNNING', 'COMPLETED']);
    expect(changed.extensions).toEqual([1, 2].map((n) => ({ traced: { label: 'RunChanged', n } })));
    changed.stop();
  });

  test('sees queries and mutations sent over the WebSocket as it sees HTTP ones', async () => {
    const answer = await new Promise<unknown>((resolve, reject) => {
      let data: unknown;
      ws.subscribe(
        { query: 'query OverTheSocket { viewer { tenant } }' },
        { next: (result) => (data = result.data), error: reject, complete: () => resolve(data) },
      );
    });
    expect(answer).toEqual({ viewer: { tenant: 'default' } });
    await waitFor(() => executed.includes('OverTheSocket'), { what: 'the plugin to see the query' });
  });
});
