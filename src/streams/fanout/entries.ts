/**
 * Entries of the replicas' Redis Stream, sealed and checked. Redis is a fast path that
 * anyone who can reach it could write to, so nothing read from it is trusted unless a replica
 * of this table wrote it: every entry carries an HMAC-SHA256 (RUNPLANE_REDIS_SECRET) over the
 * stream it was written to (so an entry of another table's stream, sealed with the same secret,
 * is not this table's), its sender, the sender's count, the time it was sent, its kind and its
 * value. An entry without a
 * valid MAC, too large, too old (a replay) or malformed is dropped and counted, never decoded.
 * A sender's entries are counted 1, 2, 3, ...: a receiver that finds one missing (dropped,
 * deleted from Redis, never sent) knows changes were lost and re-reads from the table.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The entry format this version writes and reads. */
const VERSION = 'v2';

/** A change whole, a change's notice (fanout/notices.ts: read it from the table), a resync, a heartbeat. */
export type EntryKind = 'change' | 'notice' | 'resync' | 'beat';
const KINDS: ReadonlySet<string> = new Set<EntryKind>(['change', 'notice', 'resync', 'beat']);

/** Why an entry was dropped. */
export type Dropped = 'unauthenticated' | 'oversized' | 'malformed' | 'stale';

export interface Entry {
  from: string;
  /** The sender's count: 1 for its first entry, one more for each after. */
  n: number;
  /** When it was sent (the sender's clock, ms). */
  at: number;
  kind: EntryKind;
  value: string;
}

export interface EntryRules {
  secret: string;
  /** The stream the entry must have been sealed for (its Redis key). */
  scope: string;
  /** The largest value accepted, in bytes (Redis hands the fields over as Buffers). */
  maxValueLength: number;
  /** Entries older than this (or this far in the future) are replays or clocks gone wrong. */
  maxAgeMs: number;
  now?: () => number;
}

const mac = (secret: string, scope: string, { from, n, at, kind, value }: Entry) =>
  createHmac('sha256', secret).update(`${VERSION}\n${scope}\n${from}\n${n}\n${at}\n${kind}\n${value}`).digest();

/** The fields to XADD for an entry of the stream `scope`. */
export function sealEntry(secret: string, scope: string, entry: Entry): string[] {
  return [
    'v',
    VERSION,
    'from',
    entry.from,
    'n',
    String(entry.n),
    'at',
    String(entry.at),
    'kind',
    entry.kind,
    'value',
    entry.value,
    'mac',
    mac(secret, scope, entry).toString('hex'),
  ];
}

/**
 * The entry these fields (as XREAD gives them, still as bytes) seal, or why it is dropped. An
 * oversized field is judged by its length alone, never decoded into a string.
 */
export function openEntry(raw: readonly (Buffer | string)[], rules: EntryRules): Entry | Dropped {
  if (raw.length !== 14) return 'malformed';
  for (const field of raw) if (field.length > rules.maxValueLength) return 'oversized';
  const fields = raw.map((field) => (typeof field === 'string' ? field : field.toString('utf8')));
  const [v, version, f, from, nName, n, atName, at, kindName, kind, valueName, value, macName, sealed] = fields as [
    string,
    ...string[],
  ] as string[];
  if (
    v !== 'v' ||
    version !== VERSION ||
    f !== 'from' ||
    nName !== 'n' ||
    atName !== 'at' ||
    kindName !== 'kind' ||
    valueName !== 'value' ||
    macName !== 'mac'
  )
    return 'malformed';
  if (
    !from ||
    !kind ||
    !KINDS.has(kind) ||
    !/^[1-9][0-9]{0,15}$/.test(n ?? '') ||
    !/^[0-9]{1,16}$/.test(at ?? '') ||
    !/^[0-9a-f]{64}$/.test(sealed ?? '')
  )
    return 'malformed';
  const entry: Entry = { from, n: Number(n), at: Number(at), kind: kind as EntryKind, value: value ?? '' };
  const expected = mac(rules.secret, rules.scope, entry);
  if (!timingSafeEqual(expected, Buffer.from(sealed as string, 'hex'))) return 'unauthenticated';
  const age = (rules.now ?? Date.now)() - entry.at;
  if (Math.abs(age) > rules.maxAgeMs) return 'stale';
  return entry;
}

/** Senders remembered at most (each restart of a replica is a new sender). */
const MAX_SENDERS = 1024;

/**
 * Each sender's last count: an entry that does not follow its sender's last one says entries
 * were lost between them ('gap'), one at or before it is a repeat ('repeat').
 */
export class SenderCounts {
  private readonly last = new Map<string, number>();

  /** 'next' for the entry after the last one (or a sender's first seen), 'gap' past it, 'repeat' for an old one. */
  check(from: string, n: number): 'next' | 'gap' | 'repeat' {
    const last = this.last.get(from);
    if (last !== undefined && n <= last) return 'repeat';
    this.last.delete(from);
    this.last.set(from, n);
    if (this.last.size > MAX_SENDERS) this.last.delete(this.last.keys().next().value as string);
    return last === undefined || n === last + 1 ? 'next' : 'gap';
  }
}

/** Dropped entries are told of at most once per this long (one log line, not one per entry). */
const DROP_LOG_MS = 10_000;

/** Entries dropped unread, by why, told of in one log line per interval at most. */
export class DroppedEntries {
  readonly byReason: Record<Dropped | 'repeat', number> = { unauthenticated: 0, oversized: 0, malformed: 0, stale: 0, repeat: 0 };
  private readonly sinceReport: Partial<Record<Dropped | 'repeat', number>> = {};
  private reportedAt = 0;

  constructor(private readonly warn: (line: string) => void) {}

  drop(why: Dropped | 'repeat') {
    this.byReason[why]++;
    this.sinceReport[why] = (this.sinceReport[why] ?? 0) + 1;
  }

  /** One line for the entries dropped since the last one, unless that was within the interval. */
  report(now = Date.now()) {
    if (now - this.reportedAt < DROP_LOG_MS) return;
    const said = Object.entries(this.sinceReport).filter(([, n]) => n > 0);
    if (said.length === 0) return;
    this.reportedAt = now;
    this.warn(
      `Redis: dropped ${said.map(([why, n]) => `${n} ${why}`).join(', ')} entries since the last report (not written by a replica of this table with its RUNPLANE_REDIS_SECRET, or repeated)`,
    );
    for (const [why] of said) this.sinceReport[why as Dropped] = 0;
  }
}

/** Stream entry ids in order (`<ms>-<seq>`): negative when `a` comes first. */
export function compareIds(a: string, b: string) {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}
