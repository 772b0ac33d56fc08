/**
 * ClaimLost says why: a write fenced by a claim's token, after that claim ran out, was released,
 * was taken over, or ended with the run cancelled or finished, is refused with that reason (and
 * nothing is written); a renewal by a holder whose claim was taken over says TAKEN_OVER too.
 */
import { beforeAll, expect, test } from 'vitest';
import { newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const claim = async (runId: string, holder: string, ttlSeconds = 30) =>
  (
    await api.gql('mutation($input: ClaimRunInput!) { claimRun(input: $input) { __typename ... on RunClaim { token expiresAt } } }', {
      input: { runId, holder, ttlSeconds },
    })
  ).data?.claimRun as { __typename: string; token: number; expiresAt: string };
const append = async (runId: string, fencingToken: number) =>
  (
    await api.gql(
      'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on ClaimLost { reason holder message } } }',
      { input: { runId, type: 'step', fencingToken } },
    )
  ).data?.appendEvent;
const lastSeq = async (runId: string) =>
  (await api.gql<{ run: { lastSeq: number } }>('query($id: ID!) { run(id: $id, consistent: true) { lastSeq } }', { id: runId })).data?.run
    .lastSeq;

test('EXPIRED: the claim ran out before it was renewed', async () => {
  const runId = await newRun(api);
  const { token, expiresAt } = await claim(runId, 'w1', 1);
  await waitFor(() => Date.now() > Date.parse(expiresAt) + 50, { what: 'the claim to run out' });
  expect(await append(runId, token)).toMatchObject({ __typename: 'ClaimLost', reason: 'EXPIRED', holder: null });
  expect(await lastSeq(runId)).toBe(0);
});

test('RELEASED: its holder released it', async () => {
  const runId = await newRun(api);
  const { token } = await claim(runId, 'w1');
  await api.gql('mutation($input: ReleaseRunClaimInput!) { releaseRunClaim(input: $input) { __typename } }', {
    input: { runId, holder: 'w1', token },
  });
  expect(await append(runId, token)).toMatchObject({ __typename: 'ClaimLost', reason: 'RELEASED' });
  expect(await lastSeq(runId)).toBe(0);
});

test('TAKEN_OVER: a newer claim was taken since, for writes and for a renewal alike', async () => {
  const runId = await newRun(api);
  const first = await claim(runId, 'w1', 1);
  await waitFor(() => Date.now() > Date.parse(first.expiresAt) + 50, { what: 'the first claim to run out' });
  const second = await claim(runId, 'w2');
  expect(second.token).toBeGreaterThan(first.token);
  expect(await append(runId, first.token)).toMatchObject({ __typename: 'ClaimLost', reason: 'TAKEN_OVER', holder: 'w2' });
  const renewed = await api.gql(
    'mutation($input: RenewRunClaimInput!) { renewRunClaim(input: $input) { __typename ... on ClaimLost { reason } } }',
    { input: { runId, holder: 'w1', token: first.token, ttlSeconds: 30 } },
  );
  expect(renewed.data?.renewRunClaim).toEqual({ __typename: 'ClaimLost', reason: 'TAKEN_OVER' });
  expect(await lastSeq(runId)).toBe(0);
});

test('CANCELLED: the run was cancelled, ending the claim', async () => {
  const runId = await newRun(api);
  const { token } = await claim(runId, 'w1');
  await api.gql('mutation($input: CancelRunInput!) { cancelRun(input: $input) { __typename } }', { input: { runId, reason: 'user' } });
  const refused = await append(runId, token);
  expect(refused).toMatchObject({ __typename: 'ClaimLost', reason: 'CANCELLED' });
  expect((refused as { message: string }).message).toMatch(/ended when the run was cancelled/);
});

test('FINISHED: the run reached a final status, ending the claim', async () => {
  const runId = await newRun(api);
  const { token } = await claim(runId, 'w1');
  const done = await api.gql('mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }', {
    input: { runId, from: 'RUNNING', to: 'COMPLETED', fencingToken: token },
  });
  expect(done.data?.transitionRun).toEqual({ __typename: 'Run' });
  const charged = await api.gql(
    'mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename ... on ClaimLost { reason } } }',
    { input: { runId, amount: 1, fencingToken: token } },
  );
  expect(charged.data?.chargeBudget).toEqual({ __typename: 'ClaimLost', reason: 'FINISHED' });
});
