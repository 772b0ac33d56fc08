/**
 * The client's mutations against a real server: each returns its union as a value (a refusal
 * is never thrown), failures are RunplaneErrors saying whether to retry, and a retry after a
 * lost response carries the same idempotency key, so the write is applied once.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Engine } from '@runplane/engine';
import { RunplaneError } from 'runplane/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { testClient } from '../support/client.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { freePort } from '../support/ports.ts';
import { newRun, runPartition } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

test('every mutation answers its union as a value: successes and refusals alike', async () => {
  const { client } = testClient(api.url);
  const id = uniqueName('run');
  const created = await client.createRun({ id, task: 'audit', budgetCap: 100 });
  expect(created).toMatchObject({ __typename: 'Run', id, status: 'RUNNING', budget: { cap: 100, spent: 0 } });
  expect(await client.createRun({ id, task: 'audit', budgetCap: 100 })).toMatchObject({ __typename: 'RunAlreadyExists', runId: id });

  const appended = await client.appendEvent({ runId: id, type: 'tool.called', payload: { tool: 'search' } });
  expect(appended).toMatchObject({ __typename: 'Event', seq: 1, payload: { tool: 'search' }, late: false, missingBefore: [] });
  const conflict = await client.appendEvent({ runId: id, type: 'x', seq: 5 });
  expect(conflict).toMatchObject({ __typename: 'SequenceConflict', seq: 5, lastSeq: 1 });
  if (conflict.__typename === 'SequenceConflict') expect(conflict.message).toMatch(/gap/);
  expect(await client.appendEvent({ runId: uniqueName('absent'), type: 'x' })).toMatchObject({ __typename: 'RunNotFound' });

  expect(await client.chargeBudget({ runId: id, amount: 60 })).toMatchObject({ __typename: 'Budget', spent: 60, remaining: 40 });
  expect(await client.chargeBudget({ runId: id, amount: 60 })).toMatchObject({
    __typename: 'BudgetExceeded',
    remaining: 40,
    requested: 60,
  });
  expect(await client.appendEvent({ runId: id, type: 'paid', cost: 50 })).toMatchObject({ __typename: 'BudgetExceeded' });

  expect(await client.transitionRun({ runId: id, from: 'WAITING_FOR_TOOL', to: 'RUNNING' })).toMatchObject({
    __typename: 'StatusConflict',
    current: 'RUNNING',
  });
  expect(await client.transitionRun({ runId: id, from: 'RUNNING', to: 'COMPLETED' })).toMatchObject({
    __typename: 'Run',
    status: 'COMPLETED',
  });

  const unitId = uniqueName('unit');
  const lease = await client.acquireLease({ unitId, owner: 'a', ttlSeconds: 30 });
  if (lease.__typename !== 'Lease') throw new Error(`expected a lease, got ${lease.__typename}`);
  expect(await client.acquireLease({ unitId, owner: 'b', ttlSeconds: 30 })).toMatchObject({ __typename: 'LeaseHeld', holder: 'a' });
  expect(await client.renewLease({ unitId, owner: 'a', token: lease.token + 1, ttlSeconds: 30 })).toMatchObject({
    __typename: 'LeaseLost',
  });
  expect(await client.renewLease({ unitId, owner: 'a', token: lease.token, ttlSeconds: 30 })).toMatchObject({
    __typename: 'Lease',
    token: lease.token,
  });
  expect(await client.releaseLease({ unitId, owner: 'a', token: lease.token })).toMatchObject({ __typename: 'Lease' });
  expect(await client.lease(unitId)).toBeNull();

  // A key is one request: the same key with another input is refused, as a value too.
  const idempotencyKey = uniqueName('key');
  expect(await client.appendEvent({ runId: id, type: 'once', idempotencyKey })).toMatchObject({ __typename: 'Event' });
  expect(await client.appendEvent({ runId: id, type: 'other', idempotencyKey })).toMatchObject({ __typename: 'IdempotencyConflict' });
  const read = await client.run(id, { consistent: true });
  expect(read?.events.edges.map((edge) => edge.node.type)).toEqual(['tool.called', 'once']);
});

test('bad input is a RunplaneError that is not retried; nothing is written', async () => {
  const { client, sent } = testClient(api.url);
  const error = await client.appendEvent({ runId: 'no#such', type: 'x' }).catch((err) => err);
  expect(error).toBeInstanceOf(RunplaneError);
  expect(error).toMatchObject({ code: 'BAD_USER_INPUT', retryable: false });
  expect(sent).toEqual(['AppendEvent']);
});

test('NaN or Infinity anywhere in the variables is refused before anything is sent, naming where', async () => {
  const { client, sent } = testClient(api.url);
  const runId = await newRun(api);
  const nan = await client.appendEvent({ runId, type: 'x', payload: { scores: [1, Number.NaN] } }).catch((err) => err);
  expect(nan).toBeInstanceOf(RunplaneError);
  expect(nan).toMatchObject({ code: 'BAD_USER_INPUT', retryable: false, details: { field: 'input.payload.scores[1]' } });
  expect(nan.message).toMatch(/^input\.payload\.scores\[1\] is not a finite number/);
  const infinite = await client.chargeBudget({ runId, amount: Number.POSITIVE_INFINITY }).catch((err) => err);
  expect(infinite).toMatchObject({ code: 'BAD_USER_INPUT', details: { field: 'input.amount' } });
  expect(sent).toEqual([]);
  const read = await client.run(runId, { consistent: true });
  expect(read?.lastSeq).toBe(0);
});

test('a server that cannot be reached: a retryable RunplaneError once the attempts are used up', async () => {
  const url = `http://127.0.0.1:${await freePort()}/graphql`;
  const { client, sent, notices } = testClient(url, { retry: { maxAttempts: 3, baseDelayMs: 1 } });
  const error = await client.createRun({ task: 't', budgetCap: 1 }).catch((err) => err);
  expect(error).toMatchObject({ name: 'RunplaneError', code: 'NETWORK_ERROR', retryable: true });
  expect(error.message).toBe(`server not reachable at ${url} (ECONNREFUSED)`);
  expect(sent).toEqual(['CreateRun', 'CreateRun', 'CreateRun']);
  expect(notices.map((n) => n.kind)).toEqual(['retry', 'retry']);
});

describe.skipIf(onlyEmbedded)('with faults in the engine', () => {
  let engine: Engine;
  let faulty: TestServer;
  beforeAll(async () => {
    ({ engine } = await ownEngine());
    faulty = await startTestServer({ endpoint: engine.endpoint, stopAfterAll: false });
  });
  afterAll(async () => {
    await faulty?.server.stop();
    await engine?.close();
  });

  test('a write applied but its answer lost: the client retries once, with the same key, and it is applied once', async () => {
    // The first answer to an append is lost on the way back, after the server applied it.
    let dropped = 0;
    const losing: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      if (typeof init?.body === 'string' && init.body.includes('AppendEvent') && dropped++ === 0) {
        await answer.arrayBuffer();
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      }
      return answer;
    };
    const { client, sent, notices } = testClient(faulty.url, { fetch: losing });
    const created = await client.createRun({ task: 't', budgetCap: 10 });
    if (created.__typename !== 'Run') throw new Error(created.__typename);
    const runId = created.id;
    const appended = await client.appendEvent({ runId, type: 'once', payload: { n: 1 }, cost: 3 });
    expect(appended).toMatchObject({ __typename: 'Event', seq: 1, type: 'once' });
    expect(sent.filter((name) => name === 'AppendEvent')).toHaveLength(2);
    expect(notices).toMatchObject([{ kind: 'retry', operation: 'AppendEvent', attempt: 1, error: { retryable: true } }]);
    const { Items = [] } = await faulty.server.clients.doc.send(
      new QueryCommand({
        TableName: faulty.table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': runPartition(runId) },
        ConsistentRead: true,
      }),
    );
    expect(Items.filter((row) => String(row.sk).startsWith('evt#'))).toHaveLength(1);
    expect(Items.find((row) => row.sk === '#budget')).toMatchObject({ spent: 3 });
  });
});

test('a run of several event shards through the client: created with eventShards, appended to at once, read back in seq order', async () => {
  const { client } = testClient(api.url);
  const created = await client.createRun({ task: 'fan-in', budgetCap: 10, eventShards: 6 });
  expect(created).toMatchObject({ __typename: 'Run', eventShards: 6 });
  if (created.__typename !== 'Run') throw new Error('not created');
  const appended = await Promise.all(
    Array.from({ length: 30 }, (_, i) => client.appendEvent({ runId: created.id, type: 'step', payload: { i } })),
  );
  expect(appended.map((a) => (a.__typename === 'Event' ? a.seq : 0)).sort((a, b) => a - b)).toEqual(
    Array.from({ length: 30 }, (_, i) => i + 1),
  );
  const stop = new AbortController();
  const seqs: number[] = [];
  for await (const event of client.runEvents(created.id, { afterSeq: 0, signal: stop.signal })) {
    seqs.push(event.seq);
    if (event.seq === 30) break;
  }
  stop.abort();
  expect(seqs).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
});
