/**
 * What the lease rules (domain/lease.ts) are written in: facts about the lease row, joined by
 * any / all. Each fact means one thing here (`holds`, on a row in hand) and one condition in
 * store/leases/writes.ts (on the row as a write finds it); a missing attribute meets no
 * comparison, as in DynamoDB. No I/O.
 */
import type { Lease } from './run.ts';

export type LeaseFact =
  | 'free'
  | 'present'
  | 'ended'
  | 'live'
  | 'mine'
  | 'sameToken'
  | 'tokenBelowFloor'
  | 'tokenFromFloor'
  | 'tokenBelowAhead'
  | 'tokenFromAhead';

/** Facts joined: a fact, any of some rules, or all of them. */
export type LeaseRule = LeaseFact | { any: LeaseRule[] } | { all: LeaseRule[] };

/** What the facts compare the row with: the caller, its token, the clock (epoch ms) and the token's bounds. */
export interface LeaseArgs {
  owner: string;
  token?: number;
  at: number;
  /** The smallest token an acquire at `at` may hand out. */
  floor: number;
  /** An acquire's: from which token on the row's TTL must follow the token. */
  ahead?: number;
}

/** What a fact reads of a row (null: no row); an acquire picking its case knows only a token. */
export type LeaseRow = Partial<Pick<Lease, 'owner' | 'token' | 'expiresAt'>> | null;

const atLeast = (value: number | undefined, bound: number | undefined) => value !== undefined && bound !== undefined && value >= bound;
const below = (value: number | undefined, bound: number | undefined) => value !== undefined && bound !== undefined && value < bound;

const facts: Record<LeaseFact, (row: LeaseRow, args: LeaseArgs) => boolean> = {
  /** No row: nobody ever held the unit (or TTL forgot it). */
  free: (row) => row === null,
  present: (row) => row !== null,
  /** The lease has run out: its end is not after the clock. */
  ended: (row, { at }) => atLeast(at, row?.expiresAt?.getTime()),
  live: (row, { at }) => below(at, row?.expiresAt?.getTime()),
  /** The caller holds it. */
  mine: (row, { owner }) => row?.owner === owner,
  /** With the token the caller was given: a newer one means someone took over since. */
  sameToken: (row, { token }) => token !== undefined && row?.token === token,
  tokenBelowFloor: (row, { floor }) => row?.token === undefined || row.token < floor,
  tokenFromFloor: (row, { floor }) => atLeast(row?.token, floor),
  tokenBelowAhead: (row, { ahead }) => below(row?.token, ahead),
  tokenFromAhead: (row, { ahead }) => atLeast(row?.token, ahead),
};

/** Whether `row` meets `rule`: the answer its condition gives on that row. */
export function holds(rule: LeaseRule, row: LeaseRow, args: LeaseArgs): boolean {
  if (typeof rule === 'string') return facts[rule](row, args);
  return 'any' in rule ? rule.any.some((r) => holds(r, row, args)) : rule.all.every((r) => holds(r, row, args));
}
