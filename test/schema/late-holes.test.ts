/**
 * A writer that bypasses the API leaves a hole and fills it late. A live subscriber gets
 * the late seq in its place when it comes within RUNPLANE_GAP_WAIT_SECONDS (30 s); after
 * that it is told in-band which seqs it stepped over, and still gets one written later,
 * marked late. Real time: these holes are filled 3 s and 40 s after they open.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeSse, subscribeWs, wsClient } from '../support/subscribe.ts';

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
  api = await startTestServer();
});

async function runWithEvents(count: number) {
  const id = uniqueName('run');
  await api.gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id, task: 't', budgetCap: 1 },
  });
  for (let i = 0; i < count; i++) {
    await api.gql('mutation($id: ID!) { appendEvent(input: { runId: $id, type: "api" }) { __typename } }', { id });
  }
  return id;
}

/** An event row put straight into the table, as a service bypassing the API would. */
const writeDirectly = (runId: string, seq: number) =>
  api.server.clients.doc.send(
    new PutCommand({
      TableName: api.table,
      Item: { ...keys.event('default', runId, seq), runId, seq, type: 'direct', payload: { seq }, createdAt: new Date().toISOString() },
    }),
  );

const plain = (seq: number, type: string): Delivered => ({ seq, type, late: false, missingBefore: [] });

describe('a hole filled late', () => {
  test('3 s late: both transports get 6 then 7, in order, nothing missing', async () => {
    const runId = await runWithEvents(5);
    const ws = wsClient(api.url);
    const overWs = subscribeWs<Delivered>(ws, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    const overSse = subscribeSse<Delivered>(api.url, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    await writeDirectly(runId, 7);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await writeDirectly(runId, 6);
    for (const sub of [overWs, overSse]) expect(await sub.until(2, 20_000)).toEqual([plain(6, 'direct'), plain(7, 'direct')]);
    overWs.stop();
    overSse.stop();
    await ws.dispose();
  }, 40_000);

  test('40 s late: 7 comes after the wait, listing 6 as missing; then 6 comes, marked late', async () => {
    const runId = await runWithEvents(5);
    const ws = wsClient(api.url);
    const sub = subscribeWs<Delivered>(ws, RUN_EVENTS, { runId, afterSeq: 5 }, 'runEvents');
    const opened = Date.now();
    await writeDirectly(runId, 7);
    const [stepped] = await sub.until(1, 60_000);
    // Not before the wait (30 s by default) was over.
    expect(Date.now() - opened).toBeGreaterThanOrEqual(29_000);
    expect(stepped).toEqual({ seq: 7, type: 'direct', late: false, missingBefore: [{ from: 6, to: 6 }] });
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, opened + 40_000 - Date.now())));
    await writeDirectly(runId, 6);
    expect((await sub.until(2, 20_000))[1]).toEqual({ seq: 6, type: 'direct', late: true, missingBefore: [] });
    // Nothing else: the next append comes next, once.
    await api.gql('mutation($id: ID!) { appendEvent(input: { runId: $id, type: "api" }) { __typename } }', { id: runId });
    expect((await sub.until(3, 20_000)).map((e) => e.seq)).toEqual([7, 6, 8]);
    sub.stop();
    await ws.dispose();
  }, 90_000);
});
