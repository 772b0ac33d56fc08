import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const LEASE = '__typename ... on Error { message } ... on Lease { owner token version expiresAt }';
const refusal = {
  acquireLease: '... on LeaseHeld { holder }',
  renewLease: '... on LeaseLost { currentHolder currentToken }',
  releaseLease: '... on LeaseLost { currentHolder currentToken }',
};
const call = async (mutation: 'acquireLease' | 'renewLease' | 'releaseLease', input: Record<string, unknown>) => {
  const inputType = `${mutation[0]?.toUpperCase()}${mutation.slice(1)}Input`;
  const { data, errors } = await api.gql(
    `mutation($input: ${inputType}!) { ${mutation}(input: $input) { ${LEASE} ${refusal[mutation]} } }`,
    { input },
  );
  if (errors) throw new Error(JSON.stringify(errors));
  return data[mutation];
};
const acquire = (unitId: string, owner: string, ttlSeconds = 60) => call('acquireLease', { unitId, owner, ttlSeconds });
const release = (unitId: string, owner: string, token: number) => call('releaseLease', { unitId, owner, token });
const current = async (unitId: string) => (await api.gql(`query($u: ID!) { lease(unitId: $u) { owner token } }`, { u: unitId })).data.lease;

describe.each([
  ['plain', false],
  ['with idempotency keys', true],
] as const)('lease lifecycle, %s', (_how, keyed) => {
  const key = () => (keyed ? { idempotencyKey: uniqueName('key') } : {});
  const acquire = (unitId: string, owner: string, ttlSeconds = 60) => call('acquireLease', { unitId, owner, ttlSeconds, ...key() });
  const renew = (unitId: string, owner: string, token: number, ttlSeconds = 60) =>
    call('renewLease', { unitId, owner, token, ttlSeconds, ...key() });
  const release = (unitId: string, owner: string, token: number) => call('releaseLease', { unitId, owner, token, ...key() });

  test('renew by the holder extends the expiry, keeping the token', async () => {
    const unitId = uniqueName('unit');
    const taken = await acquire(unitId, 'a', 10);
    const renewed = await renew(unitId, 'a', taken.token, 120);
    expect(renewed).toMatchObject({ __typename: 'Lease', owner: 'a', token: taken.token, version: taken.version + 1 });
    expect(new Date(renewed.expiresAt).getTime()).toBeGreaterThan(new Date(taken.expiresAt).getTime() + 100_000);
  });

  test('renew and release with a stale token, or by another owner, are LeaseLost and change nothing', async () => {
    const unitId = uniqueName('unit');
    const first = await acquire(unitId, 'a');
    const second = await acquire(unitId, 'a');
    expect(await renew(unitId, 'a', first.token)).toMatchObject({
      __typename: 'LeaseLost',
      currentHolder: 'a',
      currentToken: second.token,
    });
    expect(await release(unitId, 'a', first.token)).toMatchObject({ __typename: 'LeaseLost' });
    expect(await release(unitId, 'b', second.token)).toMatchObject({ __typename: 'LeaseLost', currentHolder: 'a' });
    expect(await current(unitId)).toEqual({ owner: 'a', token: second.token });
  });

  test('renewing an expired lease is LeaseLost (someone may hold it by now)', async () => {
    const unitId = uniqueName('unit');
    const taken = await acquire(unitId, 'a', 1);
    await waitFor(async () => (await current(unitId)) === null, { what: 'the lease to expire' });
    const lost = await renew(unitId, 'a', taken.token);
    expect(lost.__typename).toBe('LeaseLost');
    expect(lost.message).toMatch(/no longer yours/);
  });

  test('after release another owner acquires at once', async () => {
    const unitId = uniqueName('unit');
    const taken = await acquire(unitId, 'a', 3600);
    expect((await release(unitId, 'a', taken.token)).__typename).toBe('Lease');
    expect(await current(unitId)).toBeNull();
    const next = await acquire(unitId, 'b');
    expect(next).toMatchObject({ __typename: 'Lease', owner: 'b' });
    expect(next.token).toBeGreaterThan(taken.token);
  });
});

describe('lease lifecycle', () => {
  test('tokens strictly increase over acquire, release, reacquire, expiry, reclaim and the row being deleted', async () => {
    const unitId = uniqueName('unit');
    const tokens: number[] = [];
    const a = await acquire(unitId, 'a');
    tokens.push(a.token);
    await release(unitId, 'a', a.token);
    const b = await acquire(unitId, 'b', 1);
    tokens.push(b.token);
    await waitFor(async () => (await current(unitId)) === null, { what: "b's lease to expire" });
    const c = await acquire(unitId, 'c');
    tokens.push(c.token);
    tokens.push((await acquire(unitId, 'c')).token);
    // TTL deletes a lease row only a retention (days) after it ended, by when the clock has passed
    // every token the row gave out; a new row starts at the clock. Wait for that, then delete it.
    const clockSeconds = () => Math.floor((Date.now() - Date.UTC(2025, 0, 1)) / 1000);
    await waitFor(() => clockSeconds() > (tokens.at(-1) as number), { timeoutMs: 15_000, what: 'the clock to pass the last token' });
    await api.server.clients.doc.send(new DeleteCommand({ TableName: api.table, Key: { pk: `default#unit#${unitId}`, sk: 'lease' } }));
    tokens.push((await acquire(unitId, 'd')).token);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as number);
  });

  test('an expired lease not yet deleted by TTL counts as absent', async () => {
    const unitId = uniqueName('unit');
    const past = Date.now() - 3_600_000;
    // As DynamoDB leaves it: the lease ended an hour ago and its TTL passed, but the row is still there.
    await api.server.clients.doc.send(
      new PutCommand({
        TableName: api.table,
        Item: {
          pk: `default#unit#${unitId}`,
          sk: 'lease',
          unitId,
          owner: 'gone',
          token: 7,
          version: 3,
          leaseUntil: past,
          expiresAt: Math.floor(past / 1000),
        },
      }),
    );
    expect(await current(unitId)).toBeNull();
    const taken = await acquire(unitId, 'fresh');
    expect(taken).toMatchObject({ __typename: 'Lease', owner: 'fresh' });
    expect(taken.token).toBeGreaterThan(7);
  });
});
