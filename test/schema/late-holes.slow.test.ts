/**
 * A writer that bypasses the API leaves a hole and fills it late. A live subscriber gets
 * the late seq in its place when it comes within RUNPLANE_GAP_WAIT_SECONDS; after that it
 * is told in-band which seqs it stepped over, and still gets one written later, marked late.
 * Real time, on a wait shortened from its 30 s default: one hole is filled 2 s after it
 * opens, well within the wait, the other once the wait is over and the subscriber has
 * stepped over it.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { appendEvent, newRun, putEventRow } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';

const GAP_WAIT_SECONDS = 6;

interface Delivered {
  seq: number;
  type: string;
  late: boolean;
  missingBefore: { from: number; to: number }[];
}

const RUN_EVENTS = `subscription($runId: ID!, $afterSeq: Int) {
  runEvents(runId: $runId, afterSeq: $afterSeq) { seq type late missingBefore { from to } }
}`;

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({ RUNPLANE_GAP_WAIT_SECONDS: String(GAP_WAIT_SECONDS) });
});

const runWithEvents = (count: number) => newRun(api, { budgetCap: 1, events: count, type: 'api' });
const writeDirectly = (runId: string, seq: number) => putEventRow(api, runId, seq, { payload: { seq } });

const plain = (seq: number, type: string): Delivered => ({ seq, type, late: false, missingBefore: [] });

describe('a hole filled late', () => {
  test('2 s late: both transports get 6 then 7, in order, nothing missing', async () => {
    const runId = await runWithEvents(5);
    const ws = wsClient(api.url);
    const overWs = subscribeWs<Delivered>(ws, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    const overSse = subscribeSse<Delivered>(api.url, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    await writeDirectly(runId, 7);
    // The hole stays open a while (a writer that is slow, not gone), then is filled.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await writeDirectly(runId, 6);
    for (const sub of [overWs, overSse]) expect(await sub.until(2, 20_000)).toEqual([plain(6, 'direct'), plain(7, 'direct')]);
    overWs.stop();
    overSse.stop();
    await ws.dispose();
  }, 60_000);

  test('after the wait: 7 comes once it is over, listing 6 as missing; then 6 comes, marked late', async () => {
    const runId = await runWithEvents(5);
    const ws = wsClient(api.url);
    const sub = subscribeWs<Delivered>(ws, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    const opened = Date.now();
    await writeDirectly(runId, 7);
    const [stepped] = await sub.until(1, 60_000);
    // Not before the wait was over.
    expect(Date.now() - opened).toBeGreaterThanOrEqual(GAP_WAIT_SECONDS * 1000 - 1_000);
    expect(stepped).toEqual({ seq: 7, type: 'direct', late: false, missingBefore: [{ from: 6, to: 6 }] });
    // The subscriber has stepped over 6: filling it now is late.
    await writeDirectly(runId, 6);
    expect((await sub.until(2, 20_000))[1]).toEqual({ seq: 6, type: 'direct', late: true, missingBefore: [] });
    // Nothing else: the next append comes next, once.
    await appendEvent(api, runId, { type: 'api' });
    expect((await sub.until(3, 20_000)).map((e) => e.seq)).toEqual([7, 6, 8]);
    sub.stop();
    await ws.dispose();
  }, 60_000);
});
