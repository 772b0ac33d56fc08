/**
 * SIGTERM with open subscriptions (WebSocket and SSE) and appends in flight: the server tells
 * subscribers to come back (it does not complete their subscriptions), finishes the appends it
 * acknowledged, exits 0, and after a restart every acknowledged append is there.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { startMain } from '../support/main-process.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'runplane-shutdown-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const start = () => startMain({ RUNPLANE_DATA_DIR: dataDir, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' });

async function gql(url: string, query: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  return (await response.json()) as { data?: Record<string, { __typename: string; seq?: number }>; errors?: unknown[] };
}

test('SIGTERM tells subscribers to come back, loses no acknowledged append, and exits 0', async () => {
  const first = start();
  let url = '';
  const acknowledged: number[] = [];
  try {
    await waitFor(() => /Runplane is up: (\S+)/.test(first.output()), { timeoutMs: 30_000, what: 'the server' });
    url = /Runplane is up: (\S+)/.exec(first.output())?.[1] as string;
    await gql(url, 'mutation { createRun(input: { id: "kept", task: "t", budgetCap: 1 }) { __typename } }');
    const ws = wsClient(url);
    const overWs = subscribeWs<{ seq: number }>(ws, 'subscription { runEvents(runId: "kept", afterSeq: 0) { seq } }', {}, 'runEvents');
    const overSse = subscribeSse<{ seq: number }>(url, 'subscription { runEvents(runId: "kept", afterSeq: 0) { seq } }', {}, 'runEvents');
    await gql(url, 'mutation { appendEvent(input: { runId: "kept", type: "first" }) { __typename } }');
    acknowledged.push(1);
    await overWs.until(1);
    await overSse.until(1);

    // Appends keep coming while the server is told to stop.
    let stopping = false;
    const writers = Array.from({ length: 4 }, async () => {
      while (!stopping) {
        const result = await gql(
          url,
          'mutation { appendEvent(input: { runId: "kept", type: "in.flight" }) { __typename ... on Event { seq } } }',
        ).catch(() => undefined);
        const seq = result?.data?.appendEvent?.seq;
        if (seq) acknowledged.push(seq);
        else return;
      }
    });
    await waitFor(() => acknowledged.length >= 10, { what: 'appends to be flowing' });
    first.child.kill('SIGTERM');
    stopping = true;
    expect(await first.exited).toBe(0);
    await Promise.all(writers);
    // Both subscribers were told to come back, not that their subscriptions ended: the
    // WebSocket is closed with 1012 (service restart) and no complete; the SSE response ends without one.
    await waitFor(() => overSse.completed, { what: 'the SSE response to end' });
    expect(overSse.completeReceived).toBe(false);
    await waitFor(() => overWs.closeCode !== undefined, { what: 'the WebSocket to close' });
    expect(overWs.closeCode).toBe(1012);
    expect(overWs.completeReceived).toBe(false);
    await ws.dispose();
  } finally {
    first.child.kill('SIGKILL');
  }

  const second = start();
  try {
    await waitFor(() => /Runplane is up: (\S+)/.test(second.output()), { timeoutMs: 30_000, what: 'the restarted server' });
    url = /Runplane is up: (\S+)/.exec(second.output())?.[1] as string;
    const read = (await (
      await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ run(id: "kept", consistent: true) { lastSeq events(first: 500) { edges { node { seq } } } } }' }),
      })
    ).json()) as { data: { run: { lastSeq: number; events: { edges: { node: { seq: number } }[] } } } };
    const stored = read.data.run.events.edges.map((e) => e.node.seq);
    for (const seq of acknowledged) expect(stored).toContain(seq);
    expect(stored).toEqual(Array.from({ length: stored.length }, (_, i) => i + 1));
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  } finally {
    second.child.kill('SIGKILL');
  }
});
