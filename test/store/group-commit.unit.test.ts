/**
 * The group-commit queue on its own: what goes into one batch, and what a failed batch means
 * for the appends in it. The commit is the test's, so the limits show without DynamoDB.
 */
import { describe, expect, test } from 'vitest';
import type { RunEvent } from '../../src/domain/run.ts';
import { createGroupCommit, type Waiting } from '../../src/store/events/group-commit.ts';

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** A commit that records each batch and numbers its events, yielding once as a write would. */
function recordingCommit(fail?: (batch: Waiting[]) => unknown) {
  const batches: Waiting[][] = [];
  let seq = 0;
  const commit = async (_tenant: string, runId: string, batch: Waiting[]): Promise<RunEvent[]> => {
    batches.push(batch);
    await new Promise((resolve) => setImmediate(resolve));
    const err = fail?.(batch);
    if (err) throw err;
    return batch.map((w) => ({ runId, seq: ++seq, type: w.type, payload: w.payload, createdAt: w.createdAt }));
  };
  return { commit, batches };
}

describe('batching', () => {
  test('a batch holds at most 100 appends and about 3 MB, DynamoDB limits for one transaction', async () => {
    const { commit, batches } = recordingCommit();
    const group = createGroupCommit({ commit, alone: () => false, measure: (_type, payload) => 512 + JSON.stringify(payload).length });
    const sizes = () => batches.map((batch) => ({ count: batch.length, bytes: batch.reduce((sum, w) => sum + w.bytes, 0) }));
    const small = await Promise.all(range(250).map(() => group.append('t', 'r', 'step', { i: 1 }, new Date())));
    expect(small.map((e) => e.seq)).toEqual(range(250));
    expect(Math.max(...sizes().map((s) => s.count))).toBe(100);
    batches.length = 0;
    const big = { blob: 'y'.repeat(300 * 1024) };
    await Promise.all(range(40).map(() => group.append('t', 'r', 'step', big, new Date())));
    expect(Math.max(...sizes().map((s) => s.bytes))).toBeLessThanOrEqual(3 * 1024 * 1024);
    expect(sizes().reduce((n, s) => n + s.count, 0)).toBe(40);
  });

  test('appends queued in the turn of the event loop of the first go with it, even when a commit takes no turn of its own', async () => {
    const batches: number[] = [];
    // An engine in this process may answer at once: no I/O, no setImmediate.
    const commit = async (_tenant: string, runId: string, batch: Waiting[]): Promise<RunEvent[]> => {
      batches.push(batch.length);
      return batch.map((w, i) => ({ runId, seq: i + 1, type: w.type, payload: w.payload, createdAt: w.createdAt }));
    };
    const group = createGroupCommit({ commit, alone: () => false, measure: () => 600 });
    const first = group.append('t', 'r', 'step', { i: 1 }, new Date());
    // As requests read in the same turn reach their resolvers: each a few promise steps later.
    const later = (async () => {
      for (let i = 0; i < 5; i++) await Promise.resolve();
      return Promise.all([2, 3, 4].map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    })();
    await Promise.all([first, later]);
    expect(batches).toEqual([4]);
  });

  test('a batch refused for one append (nothing written) goes again one by one: only that append fails', async () => {
    const bad = new Error('too large');
    const { commit, batches } = recordingCommit((batch) => (batch.some((w) => (w.payload as { i: number }).i === 3) ? bad : undefined));
    const group = createGroupCommit({ commit, alone: (err) => err === bad, measure: () => 600 });
    const outcomes = await Promise.allSettled(range(5).map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect(batches.some((batch) => batch.length > 1)).toBe(true);
  });

  test('a batch whose outcome is unknown is not written again: every append in it fails with the error', async () => {
    const lost = new Error('response lost');
    const { commit, batches } = recordingCommit((batch) => (batch.length > 1 ? lost : undefined));
    const group = createGroupCommit({ commit, alone: () => false, measure: () => 600 });
    const outcomes = await Promise.allSettled(range(5).map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(failed.length).toBeGreaterThan(1);
    for (const o of failed) expect((o as PromiseRejectedResult).reason).toBe(lost);
    // The failed batch went once; no append of it was tried alone afterwards.
    const failedBatch = batches.find((batch) => batch.length > 1) ?? [];
    expect(batches.filter((batch) => batch.length === 1 && failedBatch.includes(batch[0] as Waiting))).toEqual([]);
  });
});

describe('throttled batches', () => {
  const throttle = Object.assign(new Error('throttled'), { name: 'ThrottlingException' });
  const isThrottle = (err: unknown) => err === throttle;

  test('a throttled batch goes back whole and smaller: halved until it fits, then growing back by a quarter a landed batch', async () => {
    let fits = 4;
    const { commit, batches } = recordingCommit((batch) => (batch.length > fits ? throttle : undefined));
    const group = createGroupCommit({ commit, alone: () => false, measure: () => 600, throttled: isThrottle });
    const first = await Promise.all(range(40).map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    expect(first.map((e) => e.seq)).toEqual(range(40));
    // Each append landed once, in order: a throttled batch wrote nothing and went again.
    expect(first.map((e) => (e.payload as { i: number }).i)).toEqual(range(40));
    const sizes = batches.map((batch) => batch.length);
    // 40 throttled, 20, 10 and 5 throttled, 2 lands, then 3 (2 x 1.25) and 4 land, 5 throttled...
    expect(sizes.slice(0, 5)).toEqual([40, 20, 10, 5, 2]);
    expect(Math.max(...sizes.slice(4).filter((_, i) => i > 0))).toBeLessThanOrEqual(5);
    fits = 100;
    batches.length = 0;
    await Promise.all(range(1000).map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    const grown = batches.map((batch) => batch.length);
    // Still small at first, then a quarter larger for each batch that landed.
    expect(grown[0]).toBeLessThan(10);
    for (let i = 1; i < grown.length - 1; i++) expect(grown[i]).toBeLessThanOrEqual(Math.ceil((grown[i - 1] as number) * 1.25));
    expect(Math.max(...grown)).toBe(100);
  });

  test('at most 10,000 runs keep a shrunk batch size: past it the one shrunk longest ago writes full batches again', async () => {
    const throttledOnce = new Set<string>();
    const batches = new Map<string, number[]>();
    const commit = async (_tenant: string, runId: string, batch: Waiting[]): Promise<RunEvent[]> => {
      batches.set(runId, [...(batches.get(runId) ?? []), batch.length]);
      await new Promise((resolve) => setImmediate(resolve));
      // Each run's first batch of more than one is throttled once.
      if (batch.length > 1 && !throttledOnce.has(runId)) {
        throttledOnce.add(runId);
        throw throttle;
      }
      return batch.map((w, i) => ({ runId, seq: i + 1, type: w.type, payload: w.payload, createdAt: w.createdAt }));
    };
    const group = createGroupCommit({ commit, alone: () => false, measure: () => 600, throttled: isThrottle });
    const burst = (runId: string, n: number) => Promise.all(range(n).map((i) => group.append('t', runId, 'step', { i }, new Date())));
    await burst('first', 41);
    // 41 throttled, then halves: the run is remembered with a batch size under 41.
    expect(batches.get('first')).toEqual([41, 20, 21]);
    await Promise.all(range(10_000).map((i) => burst(`other-${i}`, 3)));
    batches.delete('first');
    await burst('first', 41);
    // Forgotten: the 41 go as one batch again.
    expect(batches.get('first')).toEqual([41]);
  });

  test('an append whose batches stay throttled fails with the throttle after its tries; nothing else is lost', async () => {
    const { commit } = recordingCommit(() => throttle);
    let gaveUp = 0;
    const group = createGroupCommit({
      commit,
      alone: () => false,
      measure: () => 600,
      throttled: isThrottle,
      throttleAttempts: 3,
      onGiveUp: () => gaveUp++,
    });
    const outcomes = await Promise.allSettled(range(5).map((i) => group.append('t', 'r', 'step', { i }, new Date())));
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason === throttle)).toBe(true);
    expect(gaveUp).toBe(5);
  });
});
