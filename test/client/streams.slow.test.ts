/**
 * The client's streams at their edges: a consumer that stops reading (the buffer's bound, then
 * every seq once), holes a writer bypassing the API leaves (announced, then handed out late,
 * once), keys that are wrong or revoked (an error, not reconnecting for ever), and the state
 * streams, which never go back to an older version.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { collect, testClient } from '../support/client.ts';
import { appendEvent, newRun, putEventRow } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

let api: TestServer;
beforeAll(async () => {
  // Holes are waited for 1 s (not 30) before the feed steps over them.
  api = await startTestServer({ env: { RUNPLANE_GAP_WAIT_SECONDS: '1' } });
});

test('a consumer that stops reading: the buffer stops at its bound, the server lets the subscription go, and reading on gives every seq once', async () => {
  const runId = await newRun(api);
  for (let i = 0; i < 120; i++) await appendEvent(api, runId);
  const { client, notices } = testClient(api.url, { transport: 'ws', maxBufferedEvents: 25 });
  const stop = new AbortController();
  const events = client.runEvents(runId, { afterSeq: 0, signal: stop.signal });
  const first = await events.next();
  expect(first.value).toMatchObject({ seq: 1 });
  // Not reading: once 25 are held, the client gives the subscription back rather than hold more.
  await waitFor(() => api.server.live.openSubscriptions === 0, { timeoutMs: 20_000, what: 'the subscription to be given back' });
  const seqs = [first.value?.seq];
  for await (const event of events) {
    seqs.push(event.seq);
    if (event.seq === 120) break;
  }
  expect(seqs).toEqual(range(1, 120));
  expect(notices.filter((n) => n.kind === 'reconnect' && n.reason === 'backlog').length).toBeGreaterThanOrEqual(1);
  stop.abort();
});

describe.each(['ws', 'sse'] as const)('over %s', (transport) => {
  test('a hole the server steps over is announced in missingBefore, then handed out late, once, also across a reconnect', async () => {
    const runId = await newRun(api);
    for (let i = 0; i < 3; i++) await appendEvent(api, runId);
    const { client, notices } = testClient(api.url, { transport });
    const stop = new AbortController();
    const seen = collect(client.runEvents(runId, { afterSeq: 0, signal: stop.signal }));
    await waitFor(() => seen.items.length >= 3, { what: 'the first three' });
    // A writer bypassing the API writes 5 and 7, not 4 and 6.
    await putEventRow(api, runId, 5);
    await waitFor(() => seen.items.length >= 4, { timeoutMs: 20_000, what: 'seq 5, after the wait' });
    expect(seen.items[3]).toMatchObject({ seq: 5, late: false, missingBefore: [{ from: 4, to: 4 }] });
    // The client looked in the table itself before saying so.
    expect(notices).toContainEqual(expect.objectContaining({ kind: 'gap', asked: [{ from: 4, to: 4 }], found: 0 }));
    await putEventRow(api, runId, 4);
    await waitFor(() => seen.items.length >= 5, { timeoutMs: 20_000, what: 'seq 4, late' });
    expect(seen.items[4]).toMatchObject({ seq: 4, late: true, missingBefore: [] });
    await putEventRow(api, runId, 7);
    await waitFor(() => seen.items.length >= 6, { timeoutMs: 20_000, what: 'seq 7, after the wait' });
    expect(seen.items[5]).toMatchObject({ seq: 7, missingBefore: [{ from: 6, to: 6 }] });
    expect(await appendEvent(api, runId)).toMatchObject({ seq: 8 });
    await waitFor(() => seen.items.length >= 7, { what: 'seq 8' });
    stop.abort();
    await seen.done;

    // A new stream that resumes after 8 while 6 is still owed: it finds 6 in the table once it is written.
    const again = new AbortController();
    const resumed = collect(client.runEvents(runId, { afterSeq: 5, signal: again.signal }));
    await waitFor(() => resumed.items.length >= 2, { timeoutMs: 20_000, what: '7 and 8 again' });
    expect(resumed.items.map((e) => [e.seq, e.missingBefore])).toEqual([
      [7, [{ from: 6, to: 6 }]],
      [8, []],
    ]);
    await putEventRow(api, runId, 6);
    await waitFor(() => resumed.items.length >= 3, { timeoutMs: 20_000, what: 'seq 6, late' });
    expect(resumed.items[2]).toMatchObject({ seq: 6, late: true });
    expect(await appendEvent(api, runId)).toMatchObject({ seq: 9 });
    await waitFor(() => resumed.items.length >= 4, { what: 'seq 9' });
    expect(resumed.items.map((e) => e.seq)).toEqual([7, 8, 6, 9]);
    expect(seen.items.map((e) => e.seq)).toEqual([1, 2, 3, 5, 4, 7, 8]);
    again.abort();
  });

  test('runChanged and leaseChanged: the current state, then newer ones only', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    const { client } = testClient(api.url, { transport });
    const stop = new AbortController();
    const runs = collect(client.runChanged(runId, { signal: stop.signal }));
    const unitId = `unit-${runId}`;
    const leases = collect(client.leaseChanged(unitId, { signal: stop.signal }));
    await waitFor(() => runs.items.length >= 1, { what: 'the current run' });
    await client.chargeBudget({ runId, amount: 10 });
    await client.transitionRun({ runId, from: 'RUNNING', to: 'COMPLETED' });
    await waitFor(() => runs.items.at(-1)?.status === 'COMPLETED' && runs.items.at(-1)?.budget.spent === 10, { what: 'the last state' });
    // Each state is newer than the one before: no version goes back, one goes forward.
    runs.items.slice(1).forEach((run, i) => {
      const before = runs.items[i] as (typeof runs.items)[number];
      expect(run.version >= before.version && run.budget.version >= before.budget.version).toBe(true);
      expect(run.version > before.version || run.budget.version > before.budget.version).toBe(true);
    });
    const lease = await client.acquireLease({ unitId, owner: 'a', ttlSeconds: 60 });
    if (lease.__typename !== 'Lease') throw new Error(lease.__typename);
    await client.releaseLease({ unitId, owner: 'a', token: lease.token });
    await waitFor(() => leases.items.length >= 2, { what: 'the lease, then its release' });
    expect(leases.items.map((l) => l.version)).toEqual([...leases.items.map((l) => l.version)].sort((a, b) => a - b));
    expect(new Set(leases.items.map((l) => l.version)).size).toBe(leases.items.length);
    stop.abort();
    await Promise.all([runs.done, leases.done]);
    expect([runs.failure, leases.failure]).toEqual([undefined, undefined]);
  });
});

describe('API keys', () => {
  const WRITER = 'client-writer-0123456789abcdef';
  /** One key per transport, each revoked in its own test. */
  const later = (transport: string) => `client-later-${transport}-0123456789abcdef`;
  const dir = mkdtempSync(join(tmpdir(), 'runplane-client-keys-'));
  const keysFile = join(dir, 'keys');
  let keyed: TestServer;
  beforeAll(async () => {
    writeFileSync(keysFile, `${WRITER}=acme\n${later('ws')}=acme\n${later('sse')}=acme\n`);
    keyed = await startTestServer({ env: { RUNPLANE_API_KEYS_FILE: keysFile } });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test.each(['ws', 'sse'] as const)(
    'over %s: a wrong key is UNAUTHENTICATED at once; a revoked one ends the stream so',
    async (transport) => {
      const { client: writer } = testClient(keyed.url, { apiKey: WRITER });
      const created = await writer.createRun({ task: 't', budgetCap: 1 });
      if (created.__typename !== 'Run') throw new Error(created.__typename);
      const runId = created.id;

      const { client: wrong, notices } = testClient(keyed.url, { apiKey: 'not-a-key-of-this-server', transport });
      const refused = collect(wrong.runEvents(runId, { afterSeq: 0 }));
      await refused.done;
      expect(refused.failure).toMatchObject({ name: 'RunplaneError', code: 'UNAUTHENTICATED', retryable: false });
      expect(notices).toEqual([]);

      const { client: revoked } = testClient(keyed.url, { apiKey: later(transport), transport });
      const seen = collect(revoked.runEvents(runId, { afterSeq: 0 }));
      await writer.appendEvent({ runId, type: 'before' });
      await waitFor(() => seen.items.length >= 1, { what: 'the first event' });
      const others = ['ws', 'sse'].filter((t) => t !== transport).map((t) => `${later(t)}=acme\n`);
      writeFileSync(keysFile, `${WRITER}=acme\n${others.join('')}`);
      await seen.done;
      expect(seen.failure).toMatchObject({ name: 'RunplaneError', code: 'UNAUTHENTICATED', retryable: false });
    },
  );
});
