/**
 * A claim's end is marked, not only dated: a write fenced by its token that reaches the table
 * after the claim ended is refused, though the clock that sent it still reads a moment before
 * the end (another replica's clock a little behind, or a write queued a while). And a fenced
 * append is judged at the moment it is written, not when its event was made.
 */
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { ClaimLost } from '../../src/domain/errors.ts';
import type { RunEvent } from '../../src/domain/run.ts';
import { putEvents } from '../../src/store/events/writes.ts';
import { createStores } from '../../src/store/index.ts';
import { createClients } from '../../src/table/client.ts';
import { ensureTable } from '../../src/table/ensure.ts';
import { uniqueName } from '../support/aws.ts';
import { manualClock } from '../support/engine.ts';

const TENANT = 't';
const retention = { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400 };

const clients = createClients({
  endpoint: inject('dynamodbEndpoint'),
  region: 'us-east-1',
  credentials: { accessKeyId: 't', secretAccessKey: 't' },
});
afterAll(() => clients.destroy());
const tableName = uniqueName('fences');
/** Replica A ends claims; replica B, its clock `behindMs` behind A's, sends the holder's writes. */
const clockA = manualClock();
const behindMs = 5_000;
const storesOn = (now: () => number) => createStores({ doc: clients.doc, tableName, now: () => new Date(now()), retention });
const a = storesOn(clockA.now);
const b = storesOn(() => clockA.now() - behindMs);
const depsB = { doc: clients.doc, tableName, now: () => new Date(clockA.now() - behindMs), retention };

beforeAll(async () => {
  await ensureTable(clients.dynamo, tableName, { create: true });
});

async function claimedRun(ttlSeconds = 30) {
  const runId = uniqueName('run');
  await a.runs.create({ tenant: TENANT, id: runId, task: 't', budgetCap: 1000 });
  const { claim } = await a.runs.claim({ tenant: TENANT, runId, holder: 'worker', ttlSeconds });
  return { runId, token: claim.token };
}

const types = async (runId: string) =>
  (await a.events.page({ tenant: TENANT, runId, limit: 100, consistent: true })).events.map((e) => e.type);

/** The holder's fenced writes through replica B: each must be refused, and write nothing. */
async function expectFencedOut(runId: string, token: number) {
  await expect(b.events.append({ tenant: TENANT, runId, type: 'late', payload: null, fencingToken: token })).rejects.toBeInstanceOf(
    ClaimLost,
  );
  await expect(b.budgets.charge({ tenant: TENANT, runId, amount: 1, fencingToken: token })).rejects.toBeInstanceOf(ClaimLost);
  expect(await types(runId)).not.toContain('late');
}

describe('a fenced write arriving after its claim ended, from a clock that reads before the end', () => {
  test('after a cancel', async () => {
    const { runId, token } = await claimedRun();
    clockA.advance(1_000);
    await a.runs.cancel({ tenant: TENANT, runId, by: 'ops', reason: 'stop' });
    await expectFencedOut(runId, token);
  });

  test('after a release', async () => {
    const { runId, token } = await claimedRun();
    clockA.advance(1_000);
    await a.runs.releaseClaim({ tenant: TENANT, runId, holder: 'worker', token });
    await expectFencedOut(runId, token);
    await expect(b.runs.renewClaim({ tenant: TENANT, runId, holder: 'worker', token, ttlSeconds: 30 })).rejects.toBeInstanceOf(ClaimLost);
  });

  test('after the run was found stalled', async () => {
    const { runId, token } = await claimedRun(2);
    // Past the claim's end on A's clock, not yet on B's.
    clockA.advance(3_000);
    const head = await a.runs.head(TENANT, runId);
    const stalled = await a.runs.stall(TENANT, runId, head?.claim as NonNullable<typeof head>['claim'] & object);
    expect(stalled?.run.status).toBe('STALLED');
    await expectFencedOut(runId, token);
    expect((await types(runId)).at(-1)).toBe('run.stalled');
  });
});

test('a fenced append is judged when it is written, not when its event was made', async () => {
  const { runId, token } = await claimedRun(2);
  const madeAt = new Date(clockA.now() - behindMs);
  // B's clock moves past the claim's end; the event was made before it (queued a while).
  clockA.advance(behindMs + 3_000);
  const event: RunEvent = { runId, seq: 1, type: 'queued', payload: null, createdAt: madeAt };
  await expect(putEvents(depsB, TENANT, [event], { fencingToken: token })).rejects.toBeInstanceOf(ClaimLost);
  expect(await types(runId)).not.toContain('queued');
});
