/**
 * Runplane under the engine's throughput model: appends meeting their partition's limit are
 * retried by the server (group commit shrinking its batch) and land once each; only a write
 * whose partition stays throttled through every retry reaches the client, as THROTTLED with retryable: true, with nothing of it
 * written; /metrics counts the throttles by operation.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun, runPartition, storedEventRows } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const APPEND = `mutation($input: AppendEventInput!) {
  appendEvent(input: $input) { __typename ... on Event { seq payload } ... on Error { message } }
}`;

/** A labelled sample from GET /metrics (0 when the series has no such sample yet). */
async function sample(api: TestServer, name: string, operation: string) {
  const text = await (await fetch(new URL('/metrics', api.url))).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{operation="${operation}"} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe.skipIf(onlyEmbedded)('appends past the partition limit', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  let api: TestServer;
  beforeAll(async () => {
    // 50 write units a second: an event of 600 bytes costs 1 alone and 2 in a group commit's transaction.
    setup = await ownEngine({ partitionLimits: { writeUnits: 50 } });
    api = await startTestServer({ endpoint: setup.engine.endpoint });
  });
  afterAll(() => setup.engine.close());

  test('40 writers, 3 appends each, at once: every append acknowledged, seqs 1..120 once each, throttles counted', async () => {
    const runId = await newRun(api);
    const answers = await Promise.all(
      range(40).map(async (writer) => {
        const mine = [];
        for (const n of range(3)) {
          const answer = await api.gql(APPEND, { input: { runId, type: 'step', payload: { writer, n, pad: 'x'.repeat(600) } } });
          mine.push(answer.data?.appendEvent ?? answer);
        }
        return mine;
      }),
    );
    const events = answers.flat();
    for (const event of events) expect(event.__typename, JSON.stringify(event).slice(0, 300)).toBe('Event');
    expect(events.map((e) => e.seq).sort((a, b) => a - b)).toEqual(range(120).map((i) => i + 1));
    const stored = await storedEventRows(api, runId);
    expect(stored).toHaveLength(120);
    const written = stored.map((item) => `${(item.payload as { writer: number }).writer}/${(item.payload as { n: number }).n}`);
    expect(new Set(written).size).toBe(120);
    // 39 appends arrive while the first is written: 78 units in one transaction, past the bucket's 50.
    expect(await sample(api, 'runplane_dynamodb_throttles_total', 'append')).toBeGreaterThan(0);
    expect(await sample(api, 'runplane_dynamodb_throttled_refusals_total', 'append')).toBe(0);
  });
});

describe.skipIf(onlyEmbedded)('a partition throttled for longer than the retries', () => {
  let setup: Awaited<ReturnType<typeof ownEngine>>;
  let api: TestServer;
  beforeAll(async () => {
    // 5 units a second. A full bucket lets one write larger than it through, into debt (as DynamoDB's burst does).
    setup = await ownEngine({ partitionLimits: { writeUnits: 5 } });
    api = await startTestServer({ endpoint: setup.engine.endpoint });
  });
  afterAll(() => setup.engine.close());

  test('an append reaches the client as THROTTLED, retryable, after the server retried it; neither event nor charge is written', async () => {
    const runId = await newRun(api);
    // Another service writes 300 KB into the run's partition, once its bucket is full again: 300
    // units, a minute of its rate in debt.
    const ballast = new PutItemCommand({
      TableName: api.table,
      Item: { pk: { S: runPartition(runId) }, sk: { S: 'zz-ballast' }, data: { S: 'x'.repeat(300 * 1024) } },
    });
    await waitFor(
      () =>
        setup.client.send(ballast).then(
          () => true,
          () => false,
        ),
      { intervalMs: 100, what: 'a full bucket' },
    );
    const before = await sample(api, 'runplane_dynamodb_throttles_total', 'append');
    const answer = await api.gql(APPEND, { input: { runId, type: 'step', cost: 3, payload: { n: 1 } } });
    expect(answer.data?.appendEvent ?? null).toBeNull();
    expect(answer.errors?.[0]?.extensions).toMatchObject({ code: 'THROTTLED', retryable: true });
    // The server's own tries, each throttled, before the refusal.
    expect((await sample(api, 'runplane_dynamodb_throttles_total', 'append')) - before).toBe(10);
    expect(await sample(api, 'runplane_dynamodb_throttled_refusals_total', 'append')).toBe(1);
    expect(await storedEventRows(api, runId)).toHaveLength(0);
    const run = await api.gql('query($id: ID!) { run(id: $id, consistent: true) { lastSeq budget { spent } } }', { id: runId });
    expect(run.data?.run).toEqual({ lastSeq: 0, budget: { spent: 0 } });
    // Another run's partition is not in debt: its append goes through.
    const other = await newRun(api);
    const answered = await api.gql(APPEND, { input: { runId: other, type: 'step', cost: 3, payload: { n: 1 } } });
    expect(answered.data?.appendEvent).toMatchObject({ __typename: 'Event', seq: 1 });
  });
});
