/**
 * withLease against a real server: the function's signal aborts before anyone else can take
 * the unit when a renewal stalls past the lease's expiry (a fault in the engine), the lease is
 * released when the function throws, two workers on one unit never run at the same time, and
 * one that waits too long is told who holds the unit.
 */

import type { Engine } from '@runplane/engine';
import { RunplaneError } from 'runplane/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { testClient } from '../support/client.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

test('a function that throws: the lease is released at once, and the error is the function’s', async () => {
  const { client } = testClient(api.url);
  const unitId = uniqueName('unit');
  let token = 0;
  const failure = await client
    .withLease({ unitId, owner: 'a', ttlSeconds: 600 }, async (held) => {
      token = held.token;
      expect(await client.lease(unitId)).toMatchObject({ owner: 'a', token });
      throw new Error('the work failed');
    })
    .catch((err) => err);
  expect(failure).toEqual(new Error('the work failed'));
  // Free now, not in ten minutes: another owner takes it at once, with a larger token.
  expect(await client.lease(unitId)).toBeNull();
  const next = await client.acquireLease({ unitId, owner: 'b', ttlSeconds: 60 });
  expect(next).toMatchObject({ __typename: 'Lease', owner: 'b' });
  if (next.__typename === 'Lease') expect(next.token).toBeGreaterThan(token);
});

test('two workers on one unit never hold it at the same time, and each token is larger', async () => {
  const runId = await newRun(api);
  const unitId = uniqueName('unit');
  /**
   * The shared log, in the order things happened: a worker enters when its function starts and
   * leaves when it returns, or the moment its signal aborts (all withLease can answer for: it
   * cannot stop a function that ignores its signal, which is what the fencing token is for).
   */
  const log: { owner: string; at: 'enter' | 'leave'; token: number }[] = [];
  let lost = 0;
  const worker = async (owner: string) => {
    const { client } = testClient(api.url);
    for (let done = 0, tries = 0; done < 4 && tries < 12; tries++) {
      await client
        .withLease({ unitId, owner, ttlSeconds: 2, waitMs: 60_000 }, async ({ token, signal }) => {
          let left = false;
          const leave = () => {
            if (!left) log.push({ owner, at: 'leave', token });
            left = true;
          };
          signal.addEventListener('abort', leave, { once: true });
          log.push({ owner, at: 'enter', token });
          // The work: writes fenced by the token; once a round outlives the TTL, so the lease must be renewed.
          for (let step = 0; step < 3; step++) {
            signal.throwIfAborted();
            await client.appendEvent({ runId, type: 'work', payload: { owner, token, step } });
          }
          if (done === 1) await new Promise((resolve) => setTimeout(resolve, 2_500));
          signal.throwIfAborted();
          leave();
          done++;
        })
        .catch((err) => {
          // A machine too loaded to renew in time loses the lease: that round is tried again.
          if (err?.code !== 'LEASE_LOST') throw err;
          lost++;
        });
    }
  };
  await Promise.all([worker('a'), worker('b')]);
  expect(log.length).toBeGreaterThanOrEqual(16);
  for (let i = 0; i < log.length; i += 2) {
    const [enter, leave] = [log[i], log[i + 1]];
    // Every enter is followed by the same owner's leave: no interval overlaps another.
    expect(enter).toMatchObject({ at: 'enter' });
    expect(leave).toMatchObject({ at: 'leave', owner: enter?.owner, token: enter?.token });
    if (i > 0) expect(enter?.token).toBeGreaterThan(log[i - 2]?.token as number);
  }
  expect(new Set(log.map((entry) => entry.owner))).toEqual(new Set(['a', 'b']));
  expect(log.length).toBe(2 * (8 + lost));
});

test('waiting longer than waitMs for a held unit: LEASE_HELD, naming the holder', async () => {
  const { client } = testClient(api.url);
  const unitId = uniqueName('unit');
  await client.acquireLease({ unitId, owner: 'holder', ttlSeconds: 60 });
  let ran = false;
  const failure = await client
    .withLease({ unitId, owner: 'late', ttlSeconds: 5, waitMs: 300 }, async () => {
      ran = true;
    })
    .catch((err) => err);
  expect(ran).toBe(false);
  expect(failure).toBeInstanceOf(RunplaneError);
  expect(failure).toMatchObject({ code: 'LEASE_HELD', retryable: true, details: { holder: 'holder' } });
});

describe.skipIf(onlyEmbedded)('with a renewal stalled by the engine', () => {
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

  test('the signal aborts before the lease can be stolen; the function sees it, and withLease says the lease was lost', async () => {
    const { client: worker } = testClient(faulty.url);
    const { client: thief } = testClient(faulty.url);
    const unitId = uniqueName('unit');
    const log: string[] = [];
    let stolenToken = 0;
    const outcome = await worker
      .withLease({ unitId, owner: 'worker', ttlSeconds: 3 }, async ({ token, signal }) => {
        signal.addEventListener('abort', () => log.push(`worker aborted: ${(signal.reason as RunplaneError).code}`));
        // The next write of a lease (the first renewal) hangs in the engine for longer than the lease lasts.
        using stall = engine.faults.inject({ operations: ['TransactWriteItems'], latencyMs: 6_000, times: 1 });
        await waitFor(() => stall.hits === 1, { timeoutMs: 10_000, what: 'the renewal to stall' });
        // A worker stuck in its own work, ignoring the signal, while another takes the unit once it expired.
        await waitFor(
          async () => {
            const taken = await thief.acquireLease({ unitId, owner: 'thief', ttlSeconds: 60 });
            if (taken.__typename !== 'Lease') return false;
            stolenToken = taken.token;
            log.push('thief acquired');
            return true;
          },
          { timeoutMs: 20_000, intervalMs: 50, what: 'the thief to take the unit' },
        );
        log.push(`worker sees aborted: ${signal.aborted}`);
        expect(stolenToken).toBeGreaterThan(token);
        return 'finished anyway';
      })
      .catch((err) => err);
    expect(log).toEqual(['worker aborted: LEASE_LOST', 'thief acquired', 'worker sees aborted: true']);
    expect(outcome).toBeInstanceOf(RunplaneError);
    expect(outcome).toMatchObject({ code: 'LEASE_LOST', retryable: false });
    // The thief's lease was not released by the worker on its way out.
    expect(await thief.lease(unitId)).toMatchObject({ owner: 'thief', token: stolenToken });
  });
});
