/**
 * Redis fan-out bounded in bytes and shared between tenants, on a small Redis of this file's own
 * (8 MB, noeviction) and two replica processes. Tenant A writes output texts of 512 KB through
 * one replica, and a burst of smaller ones past its share: Redis's memory stays under the
 * stream's bound and refuses no write; tenant B's small changes still cross to B's subscriber on
 * the other replica (within 20 times their unloaded p99: a loose bound, as in the hostile tests);
 * A's readers there get every byte (from the table, told of each text by a notice).
 */
import type { Client } from 'graphql-ws';
import { Redis } from 'ioredis';
import { describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { leftoversAfterEach } from '../support/leftovers.ts';
import { noRedis, redisForFile } from '../support/redis.ts';
import { type Replica, shardsOwned, startReplica, stopReplica } from '../support/replicas.ts';
import { wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const redis = redisForFile();
const leftovers = leftoversAfterEach();

const KEY_A = 'tenant-a-key-0123456789';
const KEY_B = 'tenant-b-key-0123456789';
const STREAM_LENGTH = 300;
const ENTRY_BYTES = 8 * 1024;
/** A's share is small here, so that its burst passes it within the test. */
const SHARE_BYTES_PER_SECOND = 64 * 1024;
/**
 * The stream's bound (README, Scaling out): its length plus one node of 100 entries (MAXLEN ~
 * trims whole nodes), each the entry cap and 512 bytes of other fields, a quarter more for
 * Redis' allocator; 4.4 MB here, under the 8 MB Redis.
 */
const STREAM_BOUND = (STREAM_LENGTH + 100) * Math.ceil((ENTRY_BYTES + 512) * 1.25);
const MAX_MEMORY = 8 * 1024 * 1024;
/** A's texts of 512 KB: each was 1.5 MB in Redis (the live text, then its chunk rows from the writer and from the stream's reader). */
const BIG_TEXTS = 8;
const BIG = 512 * 1024;
const BURST_TEXTS = 200;
const BURST = 6 * 1024;
/** B's events timed across the replicas before, during and after A's flood (each at least). */
const SAMPLES = 15;

const env = {
  RUNPLANE_API_KEYS: `${KEY_A}=tenant-a,${KEY_B}=tenant-b`,
  RUNPLANE_REDIS_STREAM_LENGTH: String(STREAM_LENGTH),
  RUNPLANE_REDIS_ENTRY_BYTES: String(ENTRY_BYTES),
  RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND: String(SHARE_BYTES_PER_SECOND),
};

async function gqlAs(r: Replica, key: string, query: string, variables: Record<string, unknown>) {
  const response = await fetch(r.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: read by path
  return (await response.json()) as { data?: any; errors?: unknown[] };
}

/** Appends output text at `offset`, again while the server says to retry (text waiting to be stored). */
async function appendOutput(r: Replica, runId: string, stream: string, offset: number, text: string, final = false) {
  const input = { runId, stream, offset, text, final };
  const deadline = Date.now() + 60_000;
  for (;;) {
    const answer = await gqlAs(r, KEY_A, 'mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename } }', { input });
    if (answer.data?.appendOutput?.__typename === 'OutputChunk') return;
    if (!JSON.stringify(answer.errors ?? []).includes('"retryable":true') || Date.now() > deadline)
      throw new Error(`appendOutput refused: ${JSON.stringify(answer).slice(0, 500)}`);
    // The server asked for a moment: its flush is under way.
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function newRun(r: Replica, key: string) {
  const id = uniqueName('run');
  const answer = await gqlAs(r, key, 'mutation($id: ID!) { createRun(input: { id: $id, task: "t", budgetCap: 1 }) { __typename } }', {
    id,
  });
  if (answer.data?.createRun?.__typename !== 'Run') throw new Error(`could not create run ${id}: ${JSON.stringify(answer)}`);
  return id;
}

/** A runOutput subscription's text as it arrives, and whether it ended. */
function readOutput(client: Client, runId: string, stream: string) {
  const read = { text: '', done: false, errors: [] as unknown[] };
  client.subscribe<{ runOutput: { text: string } }>(
    { query: 'subscription($id: ID!, $s: String!) { runOutput(runId: $id, stream: $s) { text } }', variables: { id: runId, s: stream } },
    {
      next: ({ data }) => {
        read.text += data?.runOutput.text ?? '';
      },
      error: (err) => read.errors.push(err),
      complete: () => {
        read.done = true;
      },
    },
  );
  return read;
}

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1] as number;

const info = async (direct: Redis, section: string, field: string) =>
  Number(new RegExp(`${field}:(\\d+)`).exec(await direct.info(section))?.[1] ?? 0);

/** Two replicas on a table of their own: `writer` reads the stream's shard, `reader` learns of its writes through Redis alone. */
async function pair(settings: Record<string, string>) {
  const table = uniqueName('bytes');
  const replicas = await Promise.all([0, 1].map(() => startReplica({ table, redisUrl: redis.url, env: settings })));
  leftovers.push(async () => {
    await Promise.all(replicas.map((r) => stopReplica(r, 'SIGKILL')));
  });
  await waitFor(async () => (await shardsOwned(replicas[0] as Replica)) + (await shardsOwned(replicas[1] as Replica)) === 1, {
    timeoutMs: 30_000,
    what: 'one replica to hold the shard',
  });
  const [writer, reader] = (await shardsOwned(replicas[0] as Replica)) === 1 ? replicas : [replicas[1], replicas[0]];
  if (!writer || !reader) throw new Error('two replicas');
  return { writer, reader };
}

const sharesOf = async (r: Replica, tenant: string) =>
  (await r.metrics()).get(`runplane_redis_notices_total{tenant="${tenant}",reason="share"}`) ?? 0;

describe.skipIf(noRedis)('Redis fan-out bounded in bytes and shared between tenants', () => {
  test('a tenant writing 512 KB texts leaves Redis within its bound and the other tenant as fast as before; its readers elsewhere get every byte', async () => {
    const direct = new Redis(redis.url);
    leftovers.push(async () => {
      direct.disconnect();
    });
    await direct.config('SET', 'maxmemory-policy', 'noeviction');
    await direct.config('SET', 'maxmemory', String(MAX_MEMORY));
    const { writer, reader } = await pair(env);

    const clientA = wsClient(reader.url, { connectionParams: { authorization: `Bearer ${KEY_A}` } });
    const clientsB = [writer, reader].map((r) => wsClient(r.url, { connectionParams: { authorization: `Bearer ${KEY_B}` } }));
    leftovers.push(async () => {
      await Promise.all([clientA, ...clientsB].map((c) => c.dispose()));
    });
    const runA = await newRun(writer, KEY_A);
    const runB = await newRun(writer, KEY_B);
    const big = readOutput(clientA, runA, 'big');
    const burst = readOutput(clientA, runA, 'burst');

    // B's events arriving on the replica that wrote them (at once, from its hub) and on the other (through Redis).
    const arrivals: [here: number[], there: number[]] = [[], []];
    const errorsB: unknown[] = [];
    for (const [i, client] of clientsB.entries())
      client.subscribe(
        { query: 'subscription($id: ID!) { runEvents(runId: $id, afterSeq: 0) { seq } }', variables: { id: runB } },
        { next: () => arrivals[i]?.push(performance.now()), error: (err) => errorsB.push(err), complete: () => {} },
      );
    const [here, there] = arrivals;
    /**
     * One of B's events, timed across: from its arrival where it was written to its arrival on the
     * other replica. (From the append's send it would time the write too, which under A's flood
     * waits on the table and the writer's CPU: that is the table's share, not Redis'.)
     */
    const sampleB = async () => {
      const seq = there.length + 1;
      const answer = await gqlAs(writer, KEY_B, 'mutation($id: ID!) { appendEvent(input: { runId: $id, type: "b" }) { __typename } }', {
        id: runB,
      });
      expect(answer.data?.appendEvent?.__typename).toBe('Event');
      await waitFor(() => (here.length >= seq && there.length >= seq) || errorsB.length > 0, {
        timeoutMs: 10_000,
        what: `B's event ${seq} on both replicas`,
      });
      expect(errorsB).toEqual([]);
      return (there[seq - 1] as number) - (here[seq - 1] as number);
    };
    // B's subscriptions are live before the baseline is taken.
    await sampleB();
    const baseline: number[] = [];
    for (let i = 0; i < SAMPLES; i++) baseline.push(await sampleB());
    const memoryBefore = await info(direct, 'memory', 'used_memory');

    // A's flood: texts of 512 KB on one stream, and of 6 KB (under the entry cap, past A's share) on another.
    const bigText = (i: number) => `${String(i).padStart(4, '0')}${'x'.repeat(BIG - 4)}`;
    const burstText = (i: number) => `${String(i).padStart(4, '0')}${'y'.repeat(BURST - 4)}`;
    let flooding = true;
    let peak = memoryBefore;
    const sampling = (async () => {
      while (flooding) {
        peak = Math.max(peak, await info(direct, 'memory', 'used_memory'));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    const flood = (async () => {
      await Promise.all([
        (async () => {
          for (let i = 0; i < BIG_TEXTS; i++) await appendOutput(writer, runA, 'big', i * BIG, bigText(i));
          await appendOutput(writer, runA, 'big', BIG_TEXTS * BIG, '', true);
        })(),
        (async () => {
          for (let i = 0; i < BURST_TEXTS; i++) await appendOutput(writer, runA, 'burst', i * BURST, burstText(i));
          await appendOutput(writer, runA, 'burst', BURST_TEXTS * BURST, '', true);
        })(),
      ]);
    })().then(
      () => undefined,
      (err: unknown) => err,
    );
    void flood.finally(() => {
      flooding = false;
    });
    const loaded: number[] = [];
    while (flooding || loaded.length < SAMPLES) loaded.push(await sampleB());
    const refused = await flood;
    await sampling;
    if (refused) throw refused;

    await waitFor(() => (big.done && burst.done) || big.errors.length + burst.errors.length > 0, {
      timeoutMs: 60_000,
      what: `A's readers to reach the end (have ${big.text.length} and ${burst.text.length} characters)`,
    });
    const errorStats = await direct.info('errorstats');
    expect(errorStats, 'writes Redis refused').not.toMatch(/errorstat_OOM/);
    expect(peak - memoryBefore, "Redis's memory past the stream's bound").toBeLessThanOrEqual(STREAM_BOUND);
    const after: number[] = [];
    for (let i = 0; i < SAMPLES; i++) after.push(await sampleB());
    const unloaded = Math.max(p99(baseline), p99(after));
    expect(p99(loaded), `B's p99 across replicas under A's flood (unloaded: ${unloaded.toFixed(1)} ms)`).toBeLessThanOrEqual(
      Math.max(2_000, 20 * unloaded),
    );
    expect([big.errors, burst.errors]).toEqual([[], []]);
    expect(big.text.length).toBe(BIG_TEXTS * BIG);
    expect(big.text === Array.from({ length: BIG_TEXTS }, (_, i) => bigText(i)).join(''), "A's 512 KB texts, every byte").toBe(true);
    expect(burst.text === Array.from({ length: BURST_TEXTS }, (_, i) => burstText(i)).join(''), "A's burst, every byte").toBe(true);

    // A's changes went as notices, for their size and past its share; none of B's did, and nothing went unsent.
    const sent = await writer.metrics();
    expect(sent.get('runplane_redis_notices_total{tenant="tenant-a",reason="size"}') ?? 0).toBeGreaterThanOrEqual(BIG_TEXTS);
    expect(await sharesOf(writer, 'tenant-a')).toBeGreaterThan(0);
    expect([...sent.keys()].filter((name) => name.includes('tenant="tenant-b"'))).toEqual([]);
    for (const r of [writer, reader]) expect((await r.metrics()).get('runplane_redis_unsent_total')).toBe(0);
  });

  test("past its share, a tenant's runs and leases still reach its tenant-wide subscribers on the other replica (read from the table)", async () => {
    // A share of nothing: every change of every tenant crosses as a notice.
    const { writer, reader } = await pair({ ...env, RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND: '0' });
    const client = wsClient(reader.url, { connectionParams: { authorization: `Bearer ${KEY_A}` } });
    leftovers.push(async () => {
      await client.dispose();
    });
    const runs = new Set<string>();
    const leases = new Map<string, string>();
    const errors: unknown[] = [];
    const sink = <T>(take: (data: T) => void) => ({
      next: ({ data }: { data?: T | null }) => data && take(data),
      error: (err: unknown) => errors.push(err),
      complete: () => {},
    });
    client.subscribe(
      { query: 'subscription { runsChanged { id } }' },
      sink<{ runsChanged: { id: string } }>((d) => runs.add(d.runsChanged.id)),
    );
    client.subscribe(
      { query: 'subscription { leasesChanged { unitId owner } }' },
      sink<{ leasesChanged: { unitId: string; owner: string } }>((d) => leases.set(d.leasesChanged.unitId, d.leasesChanged.owner)),
    );
    const acquire = async (unitId: string) => {
      const answer = await gqlAs(
        writer,
        KEY_A,
        'mutation($u: ID!) { acquireLease(input: { unitId: $u, owner: "w", ttlSeconds: 60 }) { __typename } }',
        { u: unitId },
      );
      expect(answer.data?.acquireLease?.__typename).toBe('Lease');
    };
    // Both subscriptions are live once a run and a lease written after they began reach them (the first ones may come before).
    await waitFor(
      async () => {
        if (runs.size === 0) await newRun(writer, KEY_A);
        if (leases.size === 0) await acquire(uniqueName('unit'));
        return (runs.size > 0 && leases.size > 0) || errors.length > 0;
      },
      { intervalMs: 500, what: 'the subscriptions on the other replica to be live' },
    );
    const before = await sharesOf(writer, 'tenant-a');
    const ids = [await newRun(writer, KEY_A), await newRun(writer, KEY_A), await newRun(writer, KEY_A)];
    const units = [uniqueName('unit'), uniqueName('unit')];
    for (const unitId of units) await acquire(unitId);
    await waitFor(() => (ids.every((id) => runs.has(id)) && units.every((u) => leases.get(u) === 'w')) || errors.length > 0, {
      timeoutMs: 20_000,
      what: 'the runs and leases on the other replica',
    });
    expect(errors).toEqual([]);
    // Each run's change and its budget's, and each lease's, went as a notice (their records from the stream's reader too).
    expect((await sharesOf(writer, 'tenant-a')) - before).toBeGreaterThanOrEqual(2 * ids.length + units.length);
    expect((await reader.metrics()).get('runplane_redis_resyncs_total')).toBe(0);
  });
});
