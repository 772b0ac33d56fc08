/** The chaos checkers find what they are for: each broken history here must be reported, each sound one pass. */
import { describe, expect, test } from 'vitest';
import {
  checkAppends,
  checkBudgets,
  checkClaims,
  checkDeliveryLatency,
  checkLeases,
  checkMutualExclusion,
  checkSubscriptions,
  type Snapshot,
  STALL_BOUND_MS,
} from '../../chaos/checkers.ts';
import { History, type Operation } from '../../chaos/history.ts';
import { checkOutput } from '../../chaos/output.ts';

const op = (o: Partial<Operation> & Pick<Operation, 'kind' | 'input'>): Operation => ({
  client: 'c',
  start: 0,
  end: 1,
  sentAt: 0,
  outcome: 'acknowledged',
  attempts: 1,
  ...o,
});
const historyOf = (...ops: Operation[]) => {
  const history = new History();
  for (const o of ops) history.add(o);
  return history;
};
const append = (opId: string, seq: number | undefined, outcome: Operation['outcome'] = 'acknowledged', cost?: number) =>
  op({
    kind: 'append',
    input: { runId: 'r', payload: { op: opId }, ...(cost ? { cost } : {}) },
    outcome,
    result: seq ? { __typename: 'Event', seq } : undefined,
  });
const snapshot = (ops: (string | null)[], budget = { cap: 10, spent: 0 }): Snapshot => ({
  events: new Map([['r', ops.map((o, i) => ({ seq: i + 1, op: o }))]]),
  budgets: new Map([['r', budget]]),
});

describe('appends', () => {
  test('sound: every acknowledged append once at its seq, an unknown one stored once', () => {
    expect(checkAppends(historyOf(append('a', 1), append('b', 2), append('c', undefined, 'unknown')), snapshot(['a', 'b', 'c']))).toEqual(
      [],
    );
  });
  test('an acknowledged append missing, stored twice, or moved is reported', () => {
    expect(checkAppends(historyOf(append('a', 1), append('b', 2)), snapshot(['a']))).toEqual([expect.stringMatching(/b at r#2 is lost/)]);
    expect(checkAppends(historyOf(append('a', 1), append('b', 2)), snapshot(['a', 'b', 'b']))).toContainEqual(
      expect.stringMatching(/b stored 2 times/),
    );
    expect(checkAppends(historyOf(append('a', 2)), snapshot(['x', 'a']))).toContainEqual(expect.stringMatching(/no client sent: x/));
  });
  test('a gap in the seqs is reported', () => {
    const gap: Snapshot = {
      events: new Map([
        [
          'r',
          [
            { seq: 1, op: 'a' },
            { seq: 3, op: 'b' },
          ],
        ],
      ]),
      budgets: new Map(),
    };
    expect(checkAppends(historyOf(append('a', 1), append('b', 3)), gap)).toContainEqual(expect.stringMatching(/gap or a duplicate/));
  });
  test('a refused append found in the table is reported', () => {
    expect(checkAppends(historyOf(append('a', undefined, 'refused')), snapshot(['a']))).toEqual([
      expect.stringMatching(/refused append a/),
    ]);
  });
});

describe('budgets', () => {
  const charge = (amount: number, outcome: Operation['outcome'] = 'acknowledged') =>
    op({ kind: 'charge', input: { runId: 'r', amount }, outcome });
  test('sound: spent is the acknowledged charges plus acknowledged append costs', () => {
    expect(
      checkBudgets(historyOf(charge(3), charge(4, 'refused'), append('a', 1, 'acknowledged', 2)), snapshot(['a'], { cap: 10, spent: 5 })),
    ).toEqual([]);
  });
  test('spent beyond the cap, or not the sum of what was acknowledged, is reported', () => {
    expect(checkBudgets(historyOf(charge(3)), snapshot([], { cap: 10, spent: 6 }))).toEqual([expect.stringMatching(/spent 6, but .* 3/)]);
    expect(checkBudgets(historyOf(charge(12)), snapshot([], { cap: 10, spent: 12 }))).toContainEqual(
      expect.stringMatching(/passes the cap/),
    );
  });
});

describe('leases', () => {
  const acquire = (token: number, start: number, end: number, client = 'w1') =>
    op({ kind: 'acquire', client, input: { unitId: 'u', owner: client }, start, end, result: { __typename: 'Lease', token } });
  const renew = (token: number, start: number, end: number, client = 'w1') =>
    op({ kind: 'renew', client, input: { unitId: 'u', owner: client, token }, start, end, result: { __typename: 'Lease', token } });
  test('sound: growing tokens, renews only while the token is the newest', () => {
    expect(checkLeases(historyOf(acquire(1, 0, 1), renew(1, 2, 3), acquire(2, 4, 5, 'w2'), renew(2, 6, 7, 'w2')))).toEqual([]);
  });
  test('a token given twice, a smaller token later, or a renew after a newer token are reported', () => {
    expect(checkLeases(historyOf(acquire(5, 0, 1), acquire(5, 2, 3, 'w2')))).toContainEqual(expect.stringMatching(/token 5 given to/));
    expect(checkLeases(historyOf(acquire(5, 0, 1), acquire(4, 2, 3, 'w2')))).toContainEqual(
      expect.stringMatching(/token 4 issued after token 5/),
    );
    expect(checkLeases(historyOf(acquire(1, 0, 1), acquire(2, 2, 3, 'w2'), renew(1, 4, 5)))).toEqual([
      expect.stringMatching(/renew by w1 with token 1 accepted after token 2/),
    ]);
  });
  test('overlapping requests are not ordered: no report', () => {
    expect(checkLeases(historyOf(acquire(2, 0, 5), acquire(1, 1, 4, 'w2')))).toEqual([]);
  });
});

describe('one holder at a time', () => {
  const at = (ms: number) => new Date(ms).toISOString();
  /** A granted lease (acquire, renew or release answer) with server times; `sentAt` when it was asked. */
  const lease = (kind: 'acquire' | 'renew' | 'release', owner: string, token: number, from: number, until: number, sentAt = from) =>
    op({
      kind,
      client: owner,
      input: { unitId: 'u', owner, token },
      sentAt,
      result: { __typename: 'Lease', token, acquiredAt: at(from), expiresAt: at(until) },
    });
  const unanswered = (kind: 'acquire' | 'release', owner: string, sentAt: number, outcome: Operation['outcome'] = 'unknown') =>
    op({ kind, client: owner, input: { unitId: 'u', owner, token: 1 }, sentAt, outcome });
  test('sound: the next owner takes the unit once the lease expired or was released', () => {
    expect(checkMutualExclusion(historyOf(lease('acquire', 'w1', 1, 1_000, 2_000), lease('acquire', 'w2', 2, 2_000, 3_000)))).toEqual([]);
    expect(
      checkMutualExclusion(
        historyOf(
          lease('acquire', 'w1', 1, 1_000, 2_000),
          lease('release', 'w1', 1, 1_000, 1_400),
          lease('acquire', 'w2', 2, 1_500, 2_500),
        ),
      ),
    ).toEqual([]);
  });
  test('a grant to another owner while a lease is live, or renewed, is reported', () => {
    expect(checkMutualExclusion(historyOf(lease('acquire', 'w1', 1, 1_000, 2_000), lease('acquire', 'w2', 2, 1_500, 2_500)))).toEqual([
      expect.stringMatching(/w2 was given token 2 at 1500 while w1's lease with token 1 \(from 1000\) was live until 2000/),
    ]);
    expect(
      checkMutualExclusion(
        historyOf(lease('acquire', 'w1', 1, 1_000, 2_000), lease('renew', 'w1', 1, 1_000, 2_800), lease('acquire', 'w2', 2, 2_500, 3_500)),
      ),
    ).toEqual([expect.stringMatching(/w2 was given token 2 at 2500 .* live until 2800/)]);
  });
  test('an owner taking its unit again ends its older lease, also with an earlier time', () => {
    // The second incarnation's request started before the first's grant and was written after it.
    expect(
      checkMutualExclusion(
        historyOf(lease('acquire', 'w1', 1, 1_000, 2_000), lease('acquire', 'w1', 2, 900, 1_900), lease('acquire', 'w2', 3, 1_950, 2_950)),
      ),
    ).toEqual([]);
  });
  test('a release of unknown outcome, or answered LeaseLost, may have ended the lease once sent', () => {
    const w1 = lease('acquire', 'w1', 1, 1_000, 2_000);
    const w2 = lease('acquire', 'w2', 2, 1_500, 2_500);
    expect(checkMutualExclusion(historyOf(w1, unanswered('release', 'w1', 1_200), w2))).toEqual([]);
    expect(checkMutualExclusion(historyOf(w1, unanswered('release', 'w1', 1_200, 'refused'), w2))).toEqual([]);
    expect(checkMutualExclusion(historyOf(w1, unanswered('release', 'w1', 1_600), w2))).toEqual([
      expect.stringMatching(/w2 was given token 2 at 1500/),
    ]);
  });
  test('an unanswered plain acquire by either owner in between leaves the pair unjudged', () => {
    const w1 = lease('acquire', 'w1', 1, 1_000, 2_000);
    const w2 = lease('acquire', 'w2', 2, 1_500, 2_500);
    expect(checkMutualExclusion(historyOf(w1, unanswered('acquire', 'w2', 1_100), w2))).toEqual([]);
    // A keyed acquire is retried until answered: none is out of sight.
    const keyed = { ...unanswered('acquire', 'w2', 1_100), input: { unitId: 'u', owner: 'w2', idempotencyKey: 'k' } };
    expect(checkMutualExclusion(historyOf(w1, keyed, w2))).toHaveLength(1);
  });
});

describe('delivery latency', () => {
  const probeAppend = (seq: number, end: number) =>
    op({ kind: 'append', client: 'prober', input: { runId: 'p', payload: { op: `p${seq}` } }, end, result: { __typename: 'Event', seq } });
  const watcher = (received: number[], stable = true) => ({
    runId: 'p',
    resumes: 0,
    stable,
    events: received.map((_, i) => ({ seq: i + 1, op: `p${i + 1}` })),
    received,
  });
  test('sound: each probe event arrives within the limit', () => {
    expect(
      checkDeliveryLatency(historyOf(probeAppend(1, 100), probeAppend(2, 1_300)), [watcher([150, 1_900])], 'p', {
        maxMs: 1_000,
        baselineUntil: 200,
      }),
    ).toEqual([]);
  });
  test('a late probe event, or no subscriber on the probe run, is reported', () => {
    expect(
      checkDeliveryLatency(historyOf(probeAppend(1, 100), probeAppend(2, 1_300)), [watcher([150, 2_400])], 'p', {
        maxMs: 1_000,
        baselineUntil: 200,
      }),
    ).toEqual([expect.stringMatching(/probe event 2 reached its \(connected\) subscriber 1100 ms after/)]);
    expect(
      checkDeliveryLatency(historyOf(probeAppend(1, 100)), [watcher([150], false)], 'p', { maxMs: 1_000, baselineUntil: 200 }),
    ).toEqual([expect.stringMatching(/no subscriber on the probe run/)]);
  });
  test('a machine slow before the faults too is allowed three times its slowest delivery then, and no more', () => {
    // Before the faults (ends before 500) the probe took 600 ms: up to 1800 ms passes after them.
    const history = historyOf(probeAppend(1, 100), probeAppend(2, 1_000), probeAppend(3, 3_000));
    const limits = { maxMs: 1_000, baselineUntil: 500 };
    expect(checkDeliveryLatency(history, [watcher([700, 2_700, 4_700])], 'p', limits)).toEqual([]);
    expect(checkDeliveryLatency(history, [watcher([700, 2_700, 4_900])], 'p', limits)).toEqual([
      expect.stringMatching(/probe event 3 .* 1900 ms after it was acknowledged \(allowed 1800 ms/),
    ]);
  });
});

describe('subscriptions', () => {
  test('sound: every event once, in order', () => {
    expect(
      checkSubscriptions(
        [
          {
            runId: 'r',
            resumes: 2,
            events: [
              { seq: 1, op: 'a' },
              { seq: 2, op: 'b' },
            ],
          },
        ],
        snapshot(['a', 'b']),
      ),
    ).toEqual([]);
  });
  test('a missing, repeated or different event is reported', () => {
    expect(checkSubscriptions([{ runId: 'r', resumes: 0, events: [{ seq: 1, op: 'a' }] }], snapshot(['a', 'b']))).toEqual([
      expect.stringMatching(/got 1 events, the run has 2/),
    ]);
    expect(
      checkSubscriptions(
        [
          {
            runId: 'r',
            resumes: 1,
            events: [
              { seq: 1, op: 'a' },
              { seq: 1, op: 'a' },
            ],
          },
        ],
        snapshot(['a', 'b']),
      ),
    ).toEqual([expect.stringMatching(/event 2 is seq 1/)]);
  });
  test('a hole filled too late may be stepped over, and only that one', () => {
    const got = (...seqs: number[]) => [{ runId: 'r', resumes: 0, events: seqs.map((seq) => ({ seq, op: 'abc'[seq - 1] ?? null })) }];
    expect(checkSubscriptions(got(1, 3), snapshot(['a', 'b', 'c']), new Set(['b']))).toEqual([]);
    expect(checkSubscriptions(got(1, 3), snapshot(['a', 'b', 'c']), new Set(['a']))).toContainEqual(
      expect.stringMatching(/got 1 events, the run has 2/),
    );
  });
});

describe('run claims', () => {
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
  const claimed = (token: number, from: number, until: number, end = from) =>
    op({
      kind: 'claim',
      input: { runId: 'r', holder: `h${token}` },
      end,
      result: { __typename: 'RunClaim', token, acquiredAt: at(from), expiresAt: at(until) },
    });
  const released = (token: number) => op({ kind: 'releaseClaim', input: { runId: 'r', token }, result: { __typename: 'RunClaim', token } });
  const fenced = (opId: string, token: number, start: number) =>
    op({ kind: 'append', input: { runId: 'r', payload: { op: opId, token }, fencingToken: token }, start, end: start + 1 });
  const work = (seq: number, opId: string, token: number) => ({ seq, op: opId, type: 'work', token });
  const state = (events: Snapshot['events'] extends Map<string, infer E> ? E : never, status = 'COMPLETED'): Snapshot => ({
    events: new Map([['r', events]]),
    budgets: new Map(),
    statuses: new Map([['r', status]]),
  });

  test('a sound history passes: two holders in turn, the first released, the run completed', () => {
    const history = historyOf(claimed(1, 0, 10), fenced('a', 1, 2), released(1), claimed(2, 11, 20, 11), fenced('b', 2, 12), released(2));
    expect(checkClaims(history, state([work(1, 'a', 1), work(2, 'b', 2)]), ['r'])).toEqual([]);
  });

  test('a write with an older token after a newer one, or sent after a newer claim and stored, is reported', () => {
    const history = historyOf(claimed(1, 0, 10), released(1), claimed(2, 11, 20, 11), fenced('late', 1, 12), released(2));
    const found = checkClaims(history, state([work(1, 'b', 2), work(2, 'late', 1)]), ['r']);
    expect(found).toContainEqual(expect.stringMatching(/seq 2 written with token 1 after token 2/));
    expect(found).toContainEqual(expect.stringMatching(/late \(token 1\) is stored though it was sent after token 2 was claimed/));
  });

  test('a run left unfinished, or stalled and never taken over, is reported', () => {
    const history = historyOf(claimed(1, 0, 10), released(1));
    expect(checkClaims(history, state([], 'RUNNING'), ['r'])).toContainEqual(expect.stringMatching(/ended RUNNING, not COMPLETED/));
    expect(checkClaims(history, state([{ seq: 1, op: null, type: 'run.stalled', token: 1, at: 0 }]), ['r'])).toContainEqual(
      expect.stringMatching(/stalled at seq 1 and never taken over/),
    );
  });

  test('a claim that ran out unreleased must be found stalled, or taken over, within the bound', () => {
    const history = historyOf(claimed(1, 0, 10), claimed(2, 10 + STALL_BOUND_MS / 1000 + 5, 60, 99), released(2));
    expect(checkClaims(history, state([]), ['r'])).toContainEqual(
      expect.stringMatching(/token 1 ran out .* neither found stalled nor taken over/),
    );
    const inTime = historyOf(claimed(1, 0, 10), claimed(2, 12, 60, 99), released(2));
    expect(checkClaims(inTime, state([]), ['r'])).toEqual([]);
    const stalledInTime = historyOf(claimed(1, 0, 10));
    expect(
      checkClaims(
        stalledInTime,
        state([
          { seq: 1, op: null, type: 'run.stalled', token: 1, at: Date.parse(at(11)) },
          { seq: 2, op: null, type: 'run.reclaimed' },
        ]),
        ['r'],
      ),
    ).toEqual([]);
  });
});

describe('checkOutput', () => {
  const reader = (text: string, final = false, misplaced: string[] = []) => ({ text, final, resumes: 0, misplaced });
  const load = (written: string, readers: ReturnType<typeof reader>[], closed = true) => ({
    written,
    closed,
    readers,
    stop: async () => {},
  });

  test('readers that got a prefix, or all of a final stream, pass', () => {
    expect(
      checkOutput(load('t0 t1 t2 ', [reader('t0 t1 t2 ', true), reader('t0 t1 t2 ', true)]), { text: 't0 t1 t2 ', final: true }),
    ).toEqual([]);
  });

  test('a repeated or skipped chunk, a reader short of a final stream, lost or extra text, an unclosed stream: each is reported', () => {
    const stored = { text: 't0 t1 t2 ', final: true };
    expect(checkOutput(load('t0 t1 t2 ', [reader('t0 t0 t1 t2 ', true)]), stored)[0]).toMatch(/reader 0's text .* not a prefix/);
    expect(checkOutput(load('t0 t1 t2 ', [reader('t0 t2 ', true)]), stored)[0]).toMatch(/not a prefix/);
    expect(checkOutput(load('t0 t1 t2 ', [reader('t0 ')]), stored)[0]).toMatch(/stopped at 3 of 9/);
    expect(checkOutput(load('t0 t1 t2 ', [reader('t0 t1 t2 ', true, ['6 after 3'])]), stored)[0]).toMatch(/out of place: 6 after 3/);
    expect(checkOutput(load('t0 t1 t2 t3 ', []), stored)[0]).toMatch(/not what was written/);
    expect(checkOutput(load('t0 t1 t2 ', [], false), { text: 't0 t1 t2 ', final: false })[0]).toMatch(/never closed/);
  });
});
