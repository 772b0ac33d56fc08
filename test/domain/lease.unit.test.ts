/**
 * The lease deciders as given/when/then tables: given the row (or none) and the clock, when a
 * command comes, then the new lease or the refusal. No DynamoDB; the clock is a number.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import {
  acquire,
  acquireCase,
  heldByOther,
  outcome as leaseOutcome,
  liveAt,
  planAcquire,
  planRelease,
  planRenew,
  refused,
  release,
  renew,
  rowExpiry,
  TOKEN_EPOCH_S,
  tokenFloor,
} from '../../src/domain/lease.ts';
import { TOKEN_EPOCH_MS } from '../../src/domain/limits.ts';
import type { Lease } from '../../src/domain/run.ts';

/** The clock of every case: the floor is 1,000,000 here. */
const T = TOKEN_EPOCH_MS + 1_000_000_000;
const FLOOR = 1_000_000;
const RETENTION_S = 60;

/** A row held by `owner` with `token`, ending `endsIn` ms after T. */
const row = (owner: string, token: number, endsIn: number, version = 3): Lease => ({
  unitId: 'u',
  owner,
  token,
  acquiredAt: new Date(T - 60_000),
  expiresAt: new Date(T + endsIn),
  version,
});

/** What a decision came to: the parts of the lease that matter, or the refusal with what it carries. */
function outcome(decide: () => Lease) {
  try {
    const { owner, token, expiresAt, version } = decide();
    return { owner, token, expiresIn: expiresAt.getTime() - T, version };
  } catch (err) {
    const e = err as Error & { holder?: string; token?: number };
    return { refused: e.name, holder: e.holder, ...(e.token !== undefined ? { token: e.token } : {}) };
  }
}

describe('acquire', () => {
  test.each([
    { given: 'no row', row: null, expected: { owner: 'a', token: FLOOR, expiresIn: 30_000, version: 1 } },
    { given: "b's live lease", row: row('b', FLOOR + 5, 1), expected: { refused: 'LeaseHeld', holder: 'b' } },
    {
      given: "b's lease ending now",
      row: row('b', FLOOR + 5, 0),
      expected: { owner: 'a', token: FLOOR + 6, expiresIn: 30_000, version: 4 },
    },
    {
      given: 'my own live lease',
      row: row('a', FLOOR + 5, 10_000),
      expected: { owner: 'a', token: FLOOR + 6, expiresIn: 30_000, version: 4 },
    },
    {
      given: 'a row whose token fell below the floor',
      row: row('b', 42, -1),
      expected: { owner: 'a', token: FLOOR, expiresIn: 30_000, version: 4 },
    },
    {
      given: 'a token ahead of the clock',
      row: row('b', FLOOR + 900, -1),
      expected: { owner: 'a', token: FLOOR + 901, expiresIn: 30_000, version: 4 },
    },
  ])('given $given, when a acquires for 30 s', ({ row, expected }) => {
    expect(outcome(() => acquire(row, { unitId: 'u', owner: 'a', ttlSeconds: 30 }, T, RETENTION_S))).toEqual(expected);
  });

  test('the refusal names the holder and when its lease ends', () => {
    expect(() => acquire(row('b', 7, 5_000), { unitId: 'u', owner: 'a', ttlSeconds: 30 }, T, RETENTION_S)).toThrow(
      expect.objectContaining({ name: 'LeaseHeld', holder: 'b', expiresAt: new Date(T + 5_000) }),
    );
  });
});

describe('renew', () => {
  test.each([
    { given: 'my live lease', row: row('a', 7, 1), token: 7, expected: { owner: 'a', token: 7, expiresIn: 20_000, version: 4 } },
    { given: 'my live lease, a stale token', row: row('a', 8, 1), token: 7, expected: { refused: 'LeaseLost', holder: 'a', token: 8 } },
    { given: "b's live lease", row: row('b', 7, 1), token: 7, expected: { refused: 'LeaseLost', holder: 'b', token: 7 } },
    { given: 'my lease, run out', row: row('a', 7, 0), token: 7, expected: { refused: 'LeaseLost', holder: undefined } },
    { given: 'no row', row: null, token: 7, expected: { refused: 'LeaseLost', holder: undefined } },
  ])('given $given, when a renews for 20 s', ({ row, token, expected }) => {
    expect(outcome(() => renew(row, { unitId: 'u', owner: 'a', token, ttlSeconds: 20 }, T, RETENTION_S))).toEqual(expected);
  });
});

describe('release', () => {
  test.each([
    { given: 'my live lease', row: row('a', 7, 10_000), token: 7, expected: { owner: 'a', token: 7, expiresIn: 0, version: 4 } },
    { given: 'my lease, run out', row: row('a', 7, -5_000), token: 7, expected: { owner: 'a', token: 7, expiresIn: 0, version: 4 } },
    { given: 'my lease, a stale token', row: row('a', 8, 10_000), token: 7, expected: { refused: 'LeaseLost', holder: 'a', token: 8 } },
    { given: "b's live lease", row: row('b', 7, 10_000), token: 7, expected: { refused: 'LeaseLost', holder: 'b', token: 7 } },
  ])('given $given, when a releases', ({ row, token, expected }) => {
    expect(outcome(() => release(row, { unitId: 'u', owner: 'a', token }, T, RETENTION_S))).toEqual(expected);
  });
});

describe('a write refused by its condition', () => {
  // The plain path plans an acquire on a guessed token: the row that comes back tells a refusal from a wrong guess.
  test.each([
    { given: "b's live lease", row: row('b', FLOOR + 5, 1), guess: FLOOR + 5, expected: 'LeaseHeld' },
    { given: "b's lease, ended, its token guessed below the floor", row: row('b', FLOOR + 5, 0), guess: undefined, expected: null },
    { given: 'my live lease, its token guessed far ahead', row: row('a', FLOOR + 5, 1), guess: FLOOR + 500, expected: null },
  ])('given $given, an acquire is refused: $expected', ({ row, guess, expected }) => {
    const plan = planAcquire({ unitId: 'u', owner: 'a', ttlSeconds: 1 }, T, RETENTION_S, guess);
    expect(refused(plan, row)?.name ?? null).toBe(expected);
    // A wrong guess is planned again, never written as decided for another token.
    if (expected === null) expect(() => leaseOutcome(plan, row)).toThrow(/planned for another token/);
  });

  test.each([
    { given: 'my live lease', row: row('a', 7, 1) },
    { given: 'no row', row: null },
  ])('given $given, a refused renew or release is LeaseLost whatever came back', ({ row }) => {
    expect(refused(planRenew({ unitId: 'u', owner: 'a', token: 7, ttlSeconds: 1 }, T, RETENTION_S), row)?.name).toBe('LeaseLost');
    expect(refused(planRelease({ unitId: 'u', owner: 'a', token: 7 }, T, RETENTION_S), row)?.name).toBe('LeaseLost');
  });
});

describe('who holds the unit', () => {
  test.each([
    { given: "b's live lease", row: row('b', 7, 1), live: true, heldByOther: true },
    { given: 'my live lease', row: row('a', 7, 1), live: true, heldByOther: false },
    { given: "b's lease ending now", row: row('b', 7, 0), live: false, heldByOther: false },
    { given: 'no row', row: null, live: false, heldByOther: false },
  ])('given $given, at T: live $live, held by another than a $heldByOther', ({ row, live, heldByOther: other }) => {
    expect(liveAt(row, T) !== null).toBe(live);
    expect(heldByOther(row, 'a', T) !== null).toBe(other);
  });
});

describe('tokens and the clock', () => {
  test.each([
    { at: T, floor: FLOOR },
    { at: T + 999, floor: FLOOR },
    { at: T + 1_000, floor: FLOOR + 1 },
  ])('at T + $at - T ms the floor is $floor', ({ at, floor }) => {
    expect(tokenFloor(at)).toBe(floor);
  });

  // A 1 s lease with 60 s retention: the row may go at T + 61 s, so tokens from FLOOR + 60 on follow the token.
  test.each([
    { given: 'no row', token: undefined, expected: 'floor' },
    { given: 'a token below the floor', token: FLOOR - 1, expected: 'floor' },
    { given: 'the floor', token: FLOOR, expected: 'increment' },
    { given: 'a token whose successor fits the retention', token: FLOOR + 59, expected: 'increment' },
    { given: 'a token whose successor outlives the retention', token: FLOOR + 60, expected: 'ahead' },
  ])('given $given, an acquire is the $expected case', ({ token, expected }) => {
    expect(acquireCase(token, T, T + 1_000, RETENTION_S)).toBe(expected);
  });

  test.each([
    { given: 'a token at the floor', token: FLOOR, expected: T / 1000 + 1 + RETENTION_S },
    { given: 'a token far ahead', token: FLOOR + 500, expected: TOKEN_EPOCH_S + FLOOR + 501 },
  ])('given $given, the row is kept until $expected', ({ token, expected }) => {
    expect(rowExpiry(T + 1_000, token, RETENTION_S)).toBe(expected);
  });

  test('whatever happened, a row forgotten when it may be starts again above every token it gave out', () => {
    const step = fc.record({
      owner: fc.constantFrom('a', 'b'),
      // Often no time at all: many acquires within a second run the token ahead of the floor.
      advanceMs: fc.oneof({ arbitrary: fc.constant(0), weight: 8 }, { arbitrary: fc.nat(5_000), weight: 1 }),
      ttlSeconds: fc.integer({ min: 1, max: 30 }),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 150, maxLength: 400, size: 'max' }), (steps) => {
        let at = T;
        let current: Lease | null = null;
        let issued = 0;
        for (const { owner, advanceMs, ttlSeconds } of steps) {
          at += advanceMs;
          if (heldByOther(current, owner, at)) continue;
          const next = acquire(current, { unitId: 'u', owner, ttlSeconds }, at, RETENTION_S);
          expect(next.token).toBeGreaterThan(issued);
          issued = next.token;
          current = next;
        }
        const forgottenAt = rowExpiry((current as Lease).expiresAt.getTime(), issued, RETENTION_S) * 1000;
        expect(acquire(null, { unitId: 'u', owner: 'c', ttlSeconds: 1 }, forgottenAt, RETENTION_S).token).toBeGreaterThan(issued);
      }),
    );
  });
});
