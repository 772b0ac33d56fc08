/**
 * Run claims: one holder at a time, tokens that only grow; writes fenced by a token refused
 * (and nothing written) once the claim moved; cancellation that ends the claim; stalled runs
 * found once their claim runs out, and taken over.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { CONCURRENT_RUNS, StallWatcher, type StallWatcherOptions } from '../../src/jobs/stall-watcher.ts';
import type { ShardLeases } from '../../src/store/leases/shards.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { metric } from '../support/metrics.ts';
import { newRun, storedEventRows } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { subscribeWs, wsClient } from '../support/subscribe.ts';
import { waitFor } from '../support/wait.ts';

const OPS = 'ops-key-0123456789abcdef';
let api: TestServer;
beforeAll(async () => {
  api = await startTestServer({ env: { RUNPLANE_API_KEYS: `${OPS}=default:write:ops`, RUNPLANE_STALL_CHECK_SECONDS: '1' } });
});
const as = { key: OPS };

const CLAIM = `mutation($input: ClaimRunInput!) { claimRun(input: $input) {
  __typename ... on RunClaim { runId holder token expiresAt } ... on RunHeld { holder expiresAt } ... on Error { message } } }`;
const claim = async (runId: string, holder: string, ttlSeconds = 30, idempotencyKey?: string) =>
  (await api.gql(CLAIM, { input: { runId, holder, ttlSeconds, idempotencyKey } }, as)).data?.claimRun;
// ClaimLost's holder and token may be null (nobody holds the run): beside RunClaim's they are aliased.
const renew = async (runId: string, holder: string, token: number, ttlSeconds = 30) =>
  (
    await api.gql(
      'mutation($input: RenewRunClaimInput!) { renewRunClaim(input: $input) { __typename ... on RunClaim { token expiresAt } ... on ClaimLost { currentHolder: holder currentToken: token } } }',
      { input: { runId, holder, token, ttlSeconds } },
      as,
    )
  ).data?.renewRunClaim;
const release = async (runId: string, holder: string, token: number) =>
  (
    await api.gql(
      'mutation($input: ReleaseRunClaimInput!) { releaseRunClaim(input: $input) { __typename ... on ClaimLost { currentHolder: holder } } }',
      { input: { runId, holder, token } },
      as,
    )
  ).data?.releaseRunClaim;
const append = async (runId: string, fencingToken?: number, type = 'step') =>
  (
    await api.gql(
      'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } ... on ClaimLost { holder token message } } }',
      { input: { runId, type, fencingToken } },
      as,
    )
  ).data?.appendEvent;
const cancel = async (runId: string, reason: string, idempotencyKey?: string) =>
  (
    await api.gql(
      'mutation($input: CancelRunInput!) { cancelRun(input: $input) { __typename ... on Run { status version claim { holder } } ... on StatusConflict { current } } }',
      { input: { runId, reason, idempotencyKey } },
      as,
    )
  ).data?.cancelRun;
const state = async (runId: string) =>
  (
    await api.gql(
      `query { run(id: "${runId}", consistent: true) { status version claim { holder token } budget { spent } lastSeq } }`,
      {},
      as,
    )
  ).data?.run;

/** The run's events as the table holds them. */
async function eventsOf(runId: string) {
  return (await storedEventRows(api, runId)).map((item) => ({
    seq: item.seq as number,
    type: item.type as string,
    payload: item.payload as Record<string, unknown>,
  }));
}

describe('claims', () => {
  test('of ten workers racing for a run, exactly one holds it; the others are told who', async () => {
    const runId = await newRun(api, as);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => claim(runId, `worker-${i}`)));
    const won = answers.filter((a) => a.__typename === 'RunClaim');
    expect(won).toHaveLength(1);
    for (const lost of answers.filter((a) => a.__typename !== 'RunClaim'))
      expect(lost).toMatchObject({ __typename: 'RunHeld', holder: won[0].holder });
    expect((await state(runId)).claim).toEqual({ holder: won[0].holder, token: won[0].token });
  });

  test('tokens only grow: across claims by the holder, releases, expiries and takeovers', async () => {
    const runId = await newRun(api, as);
    const tokens: number[] = [];
    const a1 = await claim(runId, 'a');
    tokens.push(a1.token);
    tokens.push((await claim(runId, 'a')).token);
    expect(await release(runId, 'a', tokens[1] as number)).toMatchObject({ __typename: 'RunClaim' });
    expect((await state(runId)).claim).toBeNull();
    tokens.push((await claim(runId, 'b', 1)).token);
    // b's claim runs out: c may take it, with a larger token.
    await waitFor(async () => (await claim(runId, 'c')).__typename === 'RunClaim', { what: "b's claim to run out" });
    tokens.push((await state(runId)).claim.token);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1] as number);
    expect(await renew(runId, 'b', tokens[2] as number)).toMatchObject({ __typename: 'ClaimLost', currentHolder: 'c' });
    expect(await release(runId, 'a', tokens[1] as number)).toMatchObject({ __typename: 'ClaimLost', currentHolder: 'c' });
  });

  test('one holder claiming a run sixty times at once is never told the run is held by itself', async () => {
    const runId = await newRun(api, as);
    const answers = await Promise.all(
      Array.from({ length: 60 }, () => api.gql(CLAIM, { input: { runId, holder: 'same', ttlSeconds: 30 } }, as)),
    );
    const claims = answers.map((a) => a.data?.claimRun).filter((c) => c?.__typename === 'RunClaim');
    const others = answers.filter((a) => a.data?.claimRun?.__typename !== 'RunClaim');
    // Each claim a new token; those that lost every race are told to retry, not refused.
    expect(new Set(claims.map((c) => c.token)).size).toBe(claims.length);
    expect(claims.length).toBeGreaterThan(0);
    for (const other of others) expect(other.errors?.[0]?.extensions).toMatchObject({ code: 'CONTENTION', retryable: true });
  });

  test('claimRun with an idempotency key answers a retry with the first claim', async () => {
    const runId = await newRun(api, as);
    const key = uniqueName('claim');
    const first = await claim(runId, 'w', 30, key);
    expect(await claim(runId, 'w', 30, key)).toEqual(first);
    expect((await state(runId)).claim.token).toBe(first.token);
  });

  test('a finished or missing run is refused', async () => {
    const runId = await newRun(api, as);
    await api.gql(`mutation { transitionRun(input: { runId: "${runId}", from: RUNNING, to: COMPLETED }) { __typename } }`, {}, as);
    expect(await claim(runId, 'w')).toMatchObject({ __typename: 'StatusConflict' });
    expect(await claim('no-such-run', 'w')).toMatchObject({ __typename: 'RunNotFound' });
    // Fenced or not, every write to a run that does not exist is told so (not that a claim was lost).
    const fenced = await api.gql(
      `mutation($t: Int!) {
        chargeBudget(input: { runId: "no-such-run", amount: 1, fencingToken: $t }) { __typename }
        transitionRun(input: { runId: "no-such-run", from: RUNNING, to: WAITING_FOR_TOOL, fencingToken: $t }) { __typename }
        appendEvent(input: { runId: "no-such-run", type: "step", fencingToken: $t }) { __typename }
      }`,
      { t: 5 },
      as,
    );
    expect(fenced.data).toEqual({
      chargeBudget: { __typename: 'RunNotFound' },
      transitionRun: { __typename: 'RunNotFound' },
      appendEvent: { __typename: 'RunNotFound' },
    });
  });
});

describe('refusals say what was wrong', () => {
  test('a blank holder, a finished run, a run that does not exist', async () => {
    const runId = await newRun(api, as);
    const blank = await api.gql(CLAIM, { input: { runId, holder: '   ', ttlSeconds: 30 } }, as);
    expect(JSON.stringify(blank)).toMatch(/holder.*must not be only spaces/);
    // Nothing readable either: a zero-width space, a byte order mark, the Hangul fillers, the
    // Braille blank, a lone combining grapheme joiner or variation selector; nor half a surrogate pair.
    for (const holder of ['\u200b', '\ufeff \u200b', '\u3164', '\u2800', '\u115f\u1160', '\uffa0', '\u034f', '\ufe0f', 'w\ud800']) {
      const refused = await api.gql(CLAIM, { input: { runId, holder, ttlSeconds: 30 } }, as);
      expect(JSON.stringify(refused), JSON.stringify(holder)).toMatch(/holder.*(invisible|well-formed)/);
    }
    // Readable names that carry such characters are names: an emoji with its variation selector, accents, Hangul.
    for (const holder of ['worker \u2764\ufe0f', 'e\u0301quipe', '\ud55c\uae00']) {
      const taken = await api.gql(CLAIM, { input: { runId, holder, ttlSeconds: 30 } }, as);
      expect(JSON.stringify(taken), JSON.stringify(holder)).not.toMatch(/invisible|well-formed/);
    }
    expect(await cancel(runId, 'done here')).toMatchObject({ __typename: 'Run', status: 'CANCELLED' });
    const again = await api.gql(
      'mutation($input: ClaimRunInput!) { claimRun(input: $input) { __typename ... on StatusConflict { message } } }',
      { input: { runId, holder: 'w', ttlSeconds: 30 } },
      as,
    );
    expect(again.data.claimRun).toEqual({ __typename: 'StatusConflict', message: `run ${runId} is CANCELLED, not unfinished` });
    const renewed = await api.gql(
      'mutation($input: RenewRunClaimInput!) { renewRunClaim(input: $input) { __typename ... on ClaimLost { message } } }',
      { input: { runId: uniqueName('nowhere'), holder: 'w', token: 5, ttlSeconds: 30 } },
      as,
    );
    expect(renewed.data.renewRunClaim.message).toMatch(/has no claim \(it was never claimed, or the run does not exist\)/);
  });
});

describe('fenced writes', () => {
  test('an append, a charge, a transition and an approval request with a token that is no longer the claim are refused, and nothing is written', async () => {
    const runId = await newRun(api, as);
    const old = await claim(runId, 'a', 1);
    expect(await append(runId, old.token)).toMatchObject({ __typename: 'Event', seq: 1 });
    // a's claim runs out and b takes the run over.
    await waitFor(async () => (await claim(runId, 'b')).__typename === 'RunClaim', { what: 'b to take the run' });
    const now = (await state(runId)).claim;
    expect(await append(runId, old.token)).toMatchObject({ __typename: 'ClaimLost', holder: 'b', token: now.token });
    const charged = await api.gql(
      'mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename } }',
      { input: { runId, amount: 5, fencingToken: old.token } },
      as,
    );
    expect(charged.data.chargeBudget.__typename).toBe('ClaimLost');
    // What else the write meets, a superseded worker is told first that it lost the run:
    // a charge or a costed append past the cap, a transition from a status the run is not in.
    const overCap = await api.gql(
      'mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) { __typename } }',
      { input: { runId, amount: 5_000, fencingToken: old.token } },
      as,
    );
    expect(overCap.data.chargeBudget.__typename).toBe('ClaimLost');
    const costly = await api.gql(
      'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
      { input: { runId, type: 'step', cost: 5_000, fencingToken: old.token } },
      as,
    );
    expect(costly.data.appendEvent.__typename).toBe('ClaimLost');
    const wrongFrom = await api.gql(
      'mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }',
      { input: { runId, from: 'WAITING_FOR_TOOL', to: 'RUNNING', fencingToken: old.token } },
      as,
    );
    expect(wrongFrom.data.transitionRun.__typename).toBe('ClaimLost');
    for (const to of ['WAITING_FOR_TOOL', 'COMPLETED']) {
      const moved = await api.gql(
        'mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }',
        { input: { runId, from: 'RUNNING', to, fencingToken: old.token } },
        as,
      );
      expect(moved.data.transitionRun.__typename).toBe('ClaimLost');
    }
    const asked = await api.gql(
      'mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { __typename } }',
      { input: { runId, request: { x: 1 }, fencingToken: old.token } },
      as,
    );
    expect(asked.data.requestApproval.__typename).toBe('ClaimLost');
    expect(await state(runId)).toMatchObject({ status: 'RUNNING', version: 1, budget: { spent: 0 }, lastSeq: 1 });
    // The holder's own token still writes.
    expect(await append(runId, now.token)).toMatchObject({ __typename: 'Event', seq: 2 });
  });

  test('fenced appends in a crowd are group-committed, seqs 1..N; once the claim moves, every one of a crowd is refused', async () => {
    const runId = await newRun(api, as);
    const held = await claim(runId, 'a');
    const written = await Promise.all(Array.from({ length: 40 }, () => append(runId, held.token)));
    expect(written.map((w) => w.seq).sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(await release(runId, 'a', held.token)).toMatchObject({ __typename: 'RunClaim' });
    await claim(runId, 'b');
    const refused = await Promise.all(Array.from({ length: 40 }, () => append(runId, held.token)));
    expect(new Set(refused.map((r) => r.__typename))).toEqual(new Set(['ClaimLost']));
    expect((await eventsOf(runId)).length).toBe(40);
  });

  test('a holder finishing its run ends its claim with it', async () => {
    const runId = await newRun(api, as);
    const held = await claim(runId, 'a');
    const done = await api.gql(
      'mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename ... on Run { status claim { holder } } } }',
      { input: { runId, from: 'RUNNING', to: 'COMPLETED', fencingToken: held.token } },
      as,
    );
    expect(done.data.transitionRun).toEqual({ __typename: 'Run', status: 'COMPLETED', claim: null });
    expect(await renew(runId, 'a', held.token)).toMatchObject({ __typename: 'ClaimLost' });
  });
});

describe('cancelRun', () => {
  test('cancels, records who and why, ends the claim: the holder learns it from runChanged and its next fenced write is refused', async () => {
    const runId = await newRun(api, as);
    const held = await claim(runId, 'worker-1');
    const client = wsClient(api.url, { connectionParams: { authorization: `Bearer ${OPS}` } });
    const changes = subscribeWs<{ status: string; claim: { holder: string } | null }>(
      client,
      `subscription { runChanged(runId: "${runId}") { status claim { holder } } }`,
      {},
      'runChanged',
    );
    await changes.until(1);
    expect(changes.items[0]).toEqual({ status: 'RUNNING', claim: { holder: 'worker-1' } });
    expect(await cancel(runId, 'the user asked')).toEqual({ __typename: 'Run', status: 'CANCELLED', version: 2, claim: null });
    await waitFor(() => changes.items.some((c) => c.status === 'CANCELLED'), { what: 'the cancellation in runChanged' });
    // One transaction, one change: never the run still RUNNING with its claim ended.
    expect(changes.items).toEqual([
      { status: 'RUNNING', claim: { holder: 'worker-1' } },
      { status: 'CANCELLED', claim: null },
    ]);
    expect(await append(runId, held.token)).toMatchObject({ __typename: 'ClaimLost' });
    const events = await eventsOf(runId);
    expect(events).toEqual([
      {
        seq: 1,
        type: 'run.cancelled',
        payload: { by: 'ops', reason: 'the user asked', from: 'RUNNING', holder: { holder: 'worker-1', token: held.token } },
      },
    ]);
    await client.dispose();
  });

  test('a holder appending hard while it is cancelled: nothing of its lands after run.cancelled, and what it sends after the answer is refused', async () => {
    const runId = await newRun(api, as);
    const held = await claim(runId, 'worker-1');
    const text = 'x'.repeat(16_000);
    const appendLarge = () =>
      api.gql(
        'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }',
        { input: { runId, type: 'step', payload: { text }, fencingToken: held.token } },
        as,
      );
    // Forty appends in flight, queued in group commit's batches, when the cancel comes.
    const crowd = Array.from({ length: 40 }, () => appendLarge());
    await waitFor(async () => (await eventsOf(runId)).length >= 3, { what: 'the first appends' });
    expect((await cancel(runId, 'stop')).status).toBe('CANCELLED');
    const after = await Promise.all(Array.from({ length: 10 }, () => appendLarge()));
    expect(new Set(after.map((r) => r.data?.appendEvent.__typename))).toEqual(new Set(['ClaimLost']));
    await Promise.all(crowd);
    const events = await eventsOf(runId);
    expect(events.at(-1)?.type).toBe('run.cancelled');
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });

  test('a cancel gets through twenty writers appending with idempotency keys as fast as they can', async () => {
    const runId = await newRun(api, as);
    let stop = false;
    let appended = 0;
    const writers = Array.from({ length: 20 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        const answer = await api.gql(
          'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }',
          { input: { runId, type: 'step', idempotencyKey: `${runId}-${w}-${i}` } },
          as,
        );
        if (answer.data?.appendEvent?.__typename === 'Event') appended++;
      }
    });
    await waitFor(() => appended >= 50, { what: 'the writers to get going' });
    const cancelled = await api.gql(
      'mutation($input: CancelRunInput!) { cancelRun(input: $input) { __typename ... on Run { status } } }',
      { input: { runId, reason: 'stop' } },
      as,
    );
    stop = true;
    await Promise.all(writers);
    expect(cancelled.errors).toBeUndefined();
    expect(cancelled.data.cancelRun).toEqual({ __typename: 'Run', status: 'CANCELLED' });
  });

  test("server steps refused on the spot never hold a run's appends back", async () => {
    const runId = await newRun(api, as);
    let stop = false;
    // Eight callers resolving an approval the run never asked for: each refused at once, over and over.
    const refusers = Array.from({ length: 8 }, async () => {
      while (!stop)
        await api.gql(
          'mutation($input: ResolveApprovalInput!) { resolveApproval(input: $input) { __typename } }',
          { input: { runId, approve: true } },
          as,
        );
    });
    const answers = await Promise.all(Array.from({ length: 100 }, () => append(runId)));
    stop = true;
    await Promise.all(refusers);
    expect(answers.filter((a) => a.__typename === 'Event')).toHaveLength(100);
  });

  test('racing a claim, run.cancelled names the claim it ended whenever the claim got in first', async () => {
    const races = await Promise.all(
      Array.from({ length: 30 }, async () => {
        const runId = await newRun(api, as);
        const [claimed, cancelled] = await Promise.all([claim(runId, 'racer'), cancel(runId, 'race')]);
        return { runId, claimed, cancelled };
      }),
    );
    let both = 0;
    for (const { runId, claimed, cancelled } of races) {
      if (claimed.__typename !== 'RunClaim' || cancelled.__typename !== 'Run') continue;
      both++;
      // The claim checked the run was unfinished, so it came first: the cancel ended it.
      const recorded = (await eventsOf(runId)).find((e) => e.type === 'run.cancelled');
      expect(recorded?.payload.holder, runId).toEqual({ holder: 'racer', token: claimed.token });
    }
    expect(races.filter((r) => r.cancelled.__typename === 'Run')).toHaveLength(30);
    // The race was run: some claims got in first.
    expect(both).toBeGreaterThan(0);
  });

  test('with an idempotency key a retry is answered alike and nothing is written twice; a finished run is refused', async () => {
    const runId = await newRun(api, as);
    const key = uniqueName('cancel');
    const [first, second] = await Promise.all([cancel(runId, 'stop', key), cancel(runId, 'stop', key)]);
    expect(second).toEqual(first);
    expect((await eventsOf(runId)).filter((e) => e.type === 'run.cancelled')).toHaveLength(1);
    expect(await cancel(runId, 'again')).toMatchObject({ __typename: 'StatusConflict', current: 'CANCELLED' });
  });

  test('a run awaiting approval, or stalled, may be cancelled', async () => {
    const runId = await newRun(api, as);
    await api.gql(`mutation { requestApproval(input: { runId: "${runId}", request: 1 }) { __typename } }`, {}, as);
    expect(await cancel(runId, 'no longer needed')).toMatchObject({ status: 'CANCELLED' });
  });
});

describe('stalled runs', () => {
  test('a claim run out unrenewed: STALLED with one run.stalled event, listed; taken over with run.reclaimed; the old holder refused', async () => {
    const runId = await newRun(api, as);
    const old = await claim(runId, 'dead-worker', 1);
    await append(runId, old.token);
    const stalledAt = Date.now();
    await waitFor(async () => (await state(runId)).status === 'STALLED', { what: 'the run to be found stalled' });
    // Within the claim's TTL and one watcher interval (and room for a loaded machine).
    expect(Date.now() - stalledAt).toBeLessThan(1_000 + 1_000 + 5_000);
    const events = await eventsOf(runId);
    expect(events.map((e) => e.type)).toEqual(['step', 'run.stalled']);
    expect(events[1]?.payload).toMatchObject({ holder: 'dead-worker', token: old.token });
    await waitFor(
      async () =>
        (await api.gql('{ runs(status: STALLED, first: 500) { edges { node { id } } } }', {}, as)).data.runs.edges.some(
          (e: { node: { id: string } }) => e.node.id === runId,
        ),
      { what: 'the stalled run in runs(status: STALLED)' },
    );
    // Left alone, it stays STALLED, with still one run.stalled.
    await waitFor(async () => api.server.watcher.counts.rounds >= 3, { what: 'more watcher rounds' });
    const rounds = api.server.watcher.counts.rounds;
    await waitFor(async () => api.server.watcher.counts.rounds >= rounds + 2, { what: 'two more rounds' });
    expect((await state(runId)).status).toBe('STALLED');
    expect((await eventsOf(runId)).filter((e) => e.type === 'run.stalled')).toHaveLength(1);
    // A new worker takes it over at the next seq.
    const taken = await claim(runId, 'new-worker');
    expect(taken).toMatchObject({ __typename: 'RunClaim', holder: 'new-worker' });
    expect(taken.token).toBeGreaterThan(old.token);
    expect(await state(runId)).toMatchObject({ status: 'RUNNING', claim: { holder: 'new-worker' } });
    const after = await eventsOf(runId);
    expect(after.at(-1)).toEqual({
      seq: 3,
      type: 'run.reclaimed',
      payload: { from: { holder: 'dead-worker', token: old.token }, to: { holder: 'new-worker', token: taken.token } },
    });
    expect(await append(runId, old.token, 'late')).toMatchObject({ __typename: 'ClaimLost', holder: 'new-worker' });
    expect(await append(runId, taken.token)).toMatchObject({ __typename: 'Event', seq: 4 });
    expect(await metric(api.url, 'runplane_runs_stalled_total')).toBeGreaterThanOrEqual(1);
  });

  test('a claim renewed in time, or released, never stalls its run', async () => {
    const renewed = await newRun(api, as);
    const released = await newRun(api, as);
    const r = await claim(renewed, 'alive', 2);
    const l = await claim(released, 'done', 2);
    await release(released, 'done', l.token);
    const rounds = api.server.watcher.counts.rounds;
    for (let i = 0; i < 4; i++) {
      expect(await renew(renewed, 'alive', r.token, 2)).toMatchObject({ __typename: 'RunClaim' });
      await waitFor(async () => api.server.watcher.counts.rounds > rounds + i, { what: 'a watcher round' });
    }
    expect((await state(renewed)).status).toBe('RUNNING');
    expect((await state(released)).status).toBe('RUNNING');
  });
});

describe('stalled runs, with a watcher that looks when told', () => {
  // A server whose own watcher looks only once (at start): these tests' watcher looks when
  // told, one expired claim per index shard and round.
  let quiet: TestServer;
  let watcher: StallWatcher;
  beforeAll(async () => {
    quiet = await startTestServer({ env: { RUNPLANE_API_KEYS: `${OPS}=default:write:ops`, RUNPLANE_STALL_CHECK_SECONDS: '3600' } });
    watcher = new StallWatcher({
      runs: quiet.server.stores.runs,
      // round() alone: no lease taken.
      leases: {} as ShardLeases,
      owner: 'test',
      intervalMs: 3_600_000,
      log: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
      perRound: 1,
    });
  });
  const gql = (query: string, input: Record<string, unknown>) => quiet.gql(query, { input }, as);
  const statusOf = async (runId: string) =>
    (await quiet.gql('query($id: ID!) { run(id: $id, consistent: true) { status } }', { id: runId }, as)).data.run.status;
  const releaseOn = async (runId: string, holder: string, token: number) =>
    (
      await gql('mutation($input: ReleaseRunClaimInput!) { releaseRunClaim(input: $input) { __typename ... on RunClaim { expiresAt } } }', {
        runId,
        holder,
        token,
      })
    ).data.releaseRunClaim;

  test('expired claims of runs awaiting approval never hold back a stall; an approved one is found STALLED', async () => {
    // Four runs in one index shard: three awaiting approval, their claims running out first, then one RUNNING.
    const shardOf = (runId: string) => keys.claimListing('default', runId, 0).gsi1pk;
    const ids: string[] = [];
    for (let i = 0; ids.length < 4; i++) {
      const id = uniqueName(`shard-${i}`);
      if (ids.length === 0 || shardOf(id) === shardOf(ids[0] as string)) ids.push(id);
    }
    const [running, ...awaiting] = ids.reverse() as [string, ...string[]];
    let lastEnd = 0;
    for (const runId of [...awaiting, running]) {
      await newRun(quiet, { ...as, id: runId });
      const claimed = (await gql(CLAIM, { runId, holder: 'gone', ttlSeconds: 1 })).data.claimRun;
      lastEnd = Date.parse(claimed.expiresAt);
      if (runId === running) continue;
      const asked = await gql('mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { __typename } }', {
        runId,
        request: 'go on?',
        fencingToken: claimed.token,
      });
      expect(asked.data.requestApproval.__typename).toBe('Run');
    }
    await waitFor(async () => Date.now() > lastEnd, { what: 'every claim to run out' });
    const stalledBefore = watcher.counts.stalled;
    // One round per claim ahead of the RUNNING run's, and one for it.
    for (let round = 0; round <= awaiting.length && (await statusOf(running)) !== 'STALLED'; round++) await watcher.round();
    expect(await statusOf(running)).toBe('STALLED');
    for (const runId of awaiting) expect(await statusOf(runId)).toBe('AWAITING_APPROVAL');
    // Approved, a run whose claim ran out can stall again: its claim is back in the index.
    const approved = awaiting[0] as string;
    const resolved = await gql(
      'mutation($input: ResolveApprovalInput!) { resolveApproval(input: $input) { __typename ... on Run { status } } }',
      {
        runId: approved,
        approve: true,
      },
    );
    expect(resolved.data.resolveApproval).toEqual({ __typename: 'Run', status: 'RUNNING' });
    await watcher.round();
    expect(await statusOf(approved)).toBe('STALLED');
    expect(watcher.counts.stalled - stalledBefore).toBe(2);
  });

  test('a claim released while its run awaited approval stays out of the stall index once approved: the run never stalls', async () => {
    const runId = await newRun(quiet, as);
    const claimed = (await gql(CLAIM, { runId, holder: 'polite', ttlSeconds: 30 })).data.claimRun;
    const asked = await gql('mutation($input: RequestApprovalInput!) { requestApproval(input: $input) { __typename } }', {
      runId,
      request: 'go on?',
      fencingToken: claimed.token,
    });
    expect(asked.data.requestApproval.__typename).toBe('Run');
    expect(await releaseOn(runId, 'polite', claimed.token)).toMatchObject({ __typename: 'RunClaim' });
    const resolved = await gql('mutation($input: ResolveApprovalInput!) { resolveApproval(input: $input) { __typename } }', {
      runId,
      approve: true,
    });
    expect(resolved.data.resolveApproval.__typename).toBe('Run');
    await watcher.round();
    await watcher.round();
    expect(await statusOf(runId)).toBe('RUNNING');
  });

  test('a claim that ran out, or ended with its run, is no longer released: ClaimLost, and the stall is still found', async () => {
    const runId = await newRun(quiet, as);
    const claimed = (await gql(CLAIM, { runId, holder: 'late', ttlSeconds: 1 })).data.claimRun;
    await waitFor(async () => Date.now() > Date.parse(claimed.expiresAt), { what: 'the claim to run out' });
    expect(await releaseOn(runId, 'late', claimed.token)).toEqual({ __typename: 'ClaimLost' });
    // Not hidden by the late release: the watcher finds the run.
    for (let round = 0; round < 4 && (await statusOf(runId)) !== 'STALLED'; round++) await watcher.round();
    expect(await statusOf(runId)).toBe('STALLED');
    // A claim ended by its run's cancellation.
    const cancelled = await newRun(quiet, as);
    const live = (await gql(CLAIM, { runId: cancelled, holder: 'w', ttlSeconds: 60 })).data.claimRun;
    await gql('mutation($input: CancelRunInput!) { cancelRun(input: $input) { __typename } }', { runId: cancelled, reason: 'stop' });
    expect(await releaseOn(cancelled, 'w', live.token)).toEqual({ __typename: 'ClaimLost' });
  });

  test('rounds start an interval apart however long each takes: a claim that ran out is found within the interval, not the interval and a round', async () => {
    const own = await startTestServer({ env: { RUNPLANE_STALL_CHECK_SECONDS: '3600' } });
    // The server's own watcher lets the lease go; this one takes it with the same (real) lease client.
    const { leases, runs } = (own.server.watcher as unknown as { options: StallWatcherOptions }).options;
    await own.server.watcher.stop();
    const starts: number[] = [];
    // The real store, each round's read of the expired claims made 300 ms slower.
    const slow = Object.create(runs, {
      expiredClaims: {
        value: async (...args: Parameters<typeof runs.expiredClaims>) => {
          starts.push(performance.now());
          await new Promise((resolve) => setTimeout(resolve, 300));
          return runs.expiredClaims(...args);
        },
      },
    }) as typeof runs;
    const cadence = new StallWatcher({
      runs: slow,
      leases,
      owner: 'cadence',
      intervalMs: 1_000,
      log: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
    });
    cadence.start();
    try {
      await waitFor(() => starts.length >= 4, { what: 'four rounds' });
    } finally {
      await cadence.stop();
    }
    const gaps = starts.slice(1).map((start, i) => start - (starts[i] as number));
    // Sleeping the interval after each round, they would be 1,300 ms apart at least.
    expect(Math.min(...gaps)).toBeLessThan(1_300);
  });

  test(`claims that ran out together are looked at ${CONCURRENT_RUNS} runs at a time, every one stalled in one round`, async () => {
    const runs = quiet.server.stores.runs;
    let inFlight = 0;
    let most = 0;
    // The real store, its stall step counted on the way.
    const counted = Object.create(runs, {
      stall: {
        value: async (...args: Parameters<typeof runs.stall>) => {
          most = Math.max(most, ++inFlight);
          try {
            return await runs.stall(...args);
          } finally {
            inFlight--;
          }
        },
      },
    }) as typeof runs;
    const many = new StallWatcher({
      runs: counted,
      leases: {} as ShardLeases,
      owner: 'test',
      intervalMs: 3_600_000,
      log: { info: () => undefined, warn: () => undefined, error: () => undefined } as never,
    });
    const ids = await Promise.all(Array.from({ length: 40 }, () => newRun(quiet, as)));
    const claims = await Promise.all(ids.map(async (runId) => (await gql(CLAIM, { runId, holder: 'crowd', ttlSeconds: 1 })).data.claimRun));
    const lastEnd = Math.max(...claims.map((c) => Date.parse(c.expiresAt)));
    await waitFor(async () => Date.now() > lastEnd, { what: 'the claims to run out' });
    await many.round();
    expect(await Promise.all(ids.map(statusOf))).toEqual(ids.map(() => 'STALLED'));
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(CONCURRENT_RUNS);
  });
});

test('run(id) tells the claim in its one Query', async () => {
  const runId = await newRun(api, as);
  await claim(runId, 'w');
  const before = api.requestInputs.length;
  const { data } = await api.gql(
    `query { run(id: "${runId}") { status claim { holder } budget { cap } events(first: 5) { edges { cursor } } } }`,
    {},
    as,
  );
  expect(data.run.claim).toEqual({ holder: 'w' });
  // This run's requests (the stall watcher's rounds go on meanwhile, about other keys).
  const own = api.requestInputs.slice(before).filter((r) => JSON.stringify(r.input).includes(runId));
  expect(own.map((r) => r.name)).toEqual(['QueryCommand']);
});
