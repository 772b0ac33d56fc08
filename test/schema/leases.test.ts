import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const ACQUIRE = `mutation($input: AcquireLeaseInput!) {
  acquireLease(input: $input) {
    __typename
    ... on Lease { unitId owner token acquiredAt expiresAt }
    ... on LeaseHeld { message unitId holder expiresAt }
  }
}`;
const lease = async (unitId: string) =>
  (await api.gql(`query($u: ID!) { lease(unitId: $u) { owner token expiresAt } }`, { u: unitId })).data?.lease;

// Plain requests take one conditional update; keyed ones read the row and write the whole
// lease, conditioned on its version: each path must keep every rule.
describe.each([
  ['plain', false],
  ['with an idempotency key', true],
] as const)('acquireLease, %s', (_how, keyed) => {
  const acquire = async (unitId: string, owner: string, ttlSeconds = 60) =>
    (await api.gql(ACQUIRE, { input: { unitId, owner, ttlSeconds, ...(keyed ? { idempotencyKey: uniqueName('key') } : {}) } })).data
      ?.acquireLease;

  test('takes a free unit for ttlSeconds with a fencing token', async () => {
    const unitId = uniqueName('unit');
    const before = Date.now();
    const taken = await acquire(unitId, 'worker-a', 30);
    expect(taken).toMatchObject({ __typename: 'Lease', unitId, owner: 'worker-a' });
    // Fencing tokens start at the clock's seconds since 2025, so a deleted row never restarts below them.
    expect(taken.token).toBeGreaterThanOrEqual(Math.floor((before - Date.UTC(2025, 0, 1)) / 1000));
    const expiresIn = new Date(taken.expiresAt).getTime() - before;
    expect(expiresIn).toBeGreaterThan(29_000);
    expect(expiresIn).toBeLessThan(31_000);
    expect(await lease(unitId)).toEqual({ owner: 'worker-a', token: taken.token, expiresAt: taken.expiresAt });
  });

  test('another owner is refused with LeaseHeld naming the holder and expiry; the lease is unchanged', async () => {
    const unitId = uniqueName('unit');
    const taken = await acquire(unitId, 'worker-a');
    const refused = await acquire(unitId, 'worker-b');
    expect(refused).toEqual({
      __typename: 'LeaseHeld',
      unitId,
      holder: 'worker-a',
      expiresAt: taken.expiresAt,
      message: `unit ${unitId} is held by worker-a until ${taken.expiresAt}`,
    });
    expect((await lease(unitId)).owner).toBe('worker-a');
  });

  test('the holder acquiring again extends it with a larger token', async () => {
    const unitId = uniqueName('unit');
    const first = await acquire(unitId, 'worker-a');
    const again = await acquire(unitId, 'worker-a');
    expect(again.__typename).toBe('Lease');
    expect(again.token).toBeGreaterThan(first.token);
  });

  test('an expired lease is reclaimed by another worker with a larger token', async () => {
    const unitId = uniqueName('unit');
    const first = await acquire(unitId, 'worker-a', 1);
    await waitFor(async () => (await lease(unitId)) === null, { timeoutMs: 30_000, what: 'the lease to expire' });
    const reclaimed = await acquire(unitId, 'worker-b');
    expect(reclaimed).toMatchObject({ __typename: 'Lease', owner: 'worker-b' });
    expect(reclaimed.token).toBeGreaterThan(first.token);
  });

  test('of concurrent acquirers exactly one wins; every token issued is unique and growing', async () => {
    const unitId = uniqueName('unit');
    const results = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((owner) => acquire(unitId, owner)));
    expect(results.filter((r) => r.__typename === 'Lease')).toHaveLength(1);
    expect(results.filter((r) => r.__typename === 'LeaseHeld')).toHaveLength(5);
    const winner = results.find((r) => r.__typename === 'Lease');
    expect(results.filter((r) => r.__typename === 'LeaseHeld').every((r) => r.holder === winner.owner)).toBe(true);
  });

  test('lease(unitId) is null for a unit nobody holds', async () => {
    expect(await lease(uniqueName('unit'))).toBeNull();
  });

  test.each([
    [{ unitId: 'a#b' }, 'input.unitId'],
    [{ owner: '' }, 'input.owner'],
    [{ owner: 'line\nbreak' }, 'input.owner'],
    [{ ttlSeconds: 0 }, 'input.ttlSeconds'],
    [{ ttlSeconds: 8 * 24 * 3600 }, 'input.ttlSeconds'],
  ])('bad input %j is refused naming %s, and nothing is taken', async (bad, field) => {
    const unitId = uniqueName('unit');
    const response = await api.gql(ACQUIRE, { input: { unitId, owner: 'w', ttlSeconds: 10, ...bad } });
    expect(response.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(response.errors?.[0]?.message).toContain(field);
    expect(await lease(unitId)).toBeNull();
  });
});
