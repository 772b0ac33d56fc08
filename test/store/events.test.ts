/**
 * What the event store remembers between appends (which runs exist, where each run ends) is
 * kept on the store's own clock: moving that clock past the hints' lifetime makes the store
 * read the table again. Event rows written behind the store's back use the table's own codec.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from 'vitest';
import { RunNotFound } from '../../src/domain/errors.ts';
import { eventItem } from '../../src/table/codec.ts';
import { newStoredRun, storesOnFreshTable, TENANT } from './fixture.ts';

/** Longer than the store trusts a hint (a minute). */
const PAST_HINTS_MS = 61_000;

describe('hints on the store clock', () => {
  test("a run's existence is read once, then trusted until the store's clock says otherwise", async () => {
    const { stores, clock, sentDuring } = await storesOnFreshTable({ retention: { finishedRunSeconds: 10 } });
    const runId = await newStoredRun(stores);
    expect(await sentDuring(() => stores.events.append({ tenant: TENANT, runId, type: 'step', payload: 1 }))).toContain('GetItemCommand');
    expect(await sentDuring(() => stores.events.append({ tenant: TENANT, runId, type: 'step', payload: 2 }))).not.toContain(
      'GetItemCommand',
    );
    await stores.runs.transition({ tenant: TENANT, runId, from: 'RUNNING', to: 'COMPLETED' });
    await stores.runs.settled();
    // Past the run's retention and past the hint: the store reads the run again and finds it gone.
    clock.advance(PAST_HINTS_MS);
    await expect(stores.events.append({ tenant: TENANT, runId, type: 'step', payload: 3 })).rejects.toBeInstanceOf(RunNotFound);
  });

  test("a run's last seq is a hint: a stale one costs a collision, an old one is read again", async () => {
    const { stores, clients, table, clock } = await storesOnFreshTable();
    const runId = await newStoredRun(stores);
    const append = async () => (await stores.events.append({ tenant: TENANT, runId, type: 'step', payload: null })).seq;
    const putBehindTheStore = (seq: number) =>
      clients.doc.send(
        new PutCommand({
          TableName: table,
          Item: eventItem(TENANT, { runId, seq, type: 'direct', payload: null, createdAt: new Date() }, 'other'),
        }),
      );
    expect(await append()).toBe(1);
    await putBehindTheStore(2);
    let conflicts = stores.events.counters.conflicts;
    // The hint still says 1: the append tries seq 2, finds it taken, and goes after it.
    expect(await append()).toBe(3);
    expect(stores.events.counters.conflicts).toBe(conflicts + 1);
    await putBehindTheStore(4);
    clock.advance(PAST_HINTS_MS);
    conflicts = stores.events.counters.conflicts;
    // The hint is too old to trust: the run's end is read first, and nothing collides.
    expect(await append()).toBe(5);
    expect(stores.events.counters.conflicts).toBe(conflicts);
  });

  test.each([
    ['plain (group commit)', {}],
    ['with a cost', { cost: 1 }],
    ['with an idempotency key', { idem: true }],
  ])("%s: after a collision the append goes after the run's end, never into a hole another writer left", async (_, how) => {
    const { stores, clients, table } = await storesOnFreshTable();
    const runId = await newStoredRun(stores);
    const direct = (seq: number) =>
      clients.doc.send(
        new PutCommand({
          TableName: table,
          Item: eventItem(TENANT, { runId, seq, type: 'direct', payload: null, createdAt: new Date() }, 'other'),
        }),
      );
    expect((await stores.events.append({ tenant: TENANT, runId, type: 'step', payload: null })).seq).toBe(1);
    // Another writer took 2 and 4 and left 3 free: the hint (1) leads to 2, taken.
    await direct(2);
    await direct(4);
    const input = { tenant: TENANT, runId, type: 'step', payload: null, ...('cost' in how ? { cost: how.cost } : {}) };
    const idem = 'idem' in how ? { tenant: TENANT, key: 'append-after-hole', operation: 'appendEvent', request: input } : undefined;
    expect((await stores.events.append(input, idem)).seq).toBe(5);
  });
});
