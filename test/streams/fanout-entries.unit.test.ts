/**
 * Entries of the replicas' Redis Stream on their own, without Redis: a change's trip through
 * the codec, the seal, the sender counts, the heartbeats; each tenant's share of the bytes sent
 * (a token bucket on a clock of the test's) and the notices a change past its entry's bound or
 * its tenant's share goes as. test/streams/redis-fanout.e2e.test.ts has them over a real Redis.
 */
import { describe, expect, test } from 'vitest';
import type { Change } from '../../src/streams/changes.ts';
import { decodeChange, encodeChange } from '../../src/streams/fanout/codec.ts';
import { type Entry, openEntry, SenderCounts, sealEntry } from '../../src/streams/fanout/entries.ts';
import { Heartbeats } from '../../src/streams/fanout/heartbeats.ts';
import { decodeNotice, noticeOf, withoutRepeatedNotices } from '../../src/streams/fanout/notices.ts';
import { EntryShares, MAX_TENANT_BUCKETS, MAX_TENANTS_COUNTED, NoticeCounts, TenantShares } from '../../src/streams/fanout/shares.ts';

const SECRET = 'the-replicas-of-this-test-share-it';

const event = (seq: number, tenant = 'default', payload: unknown = { n: seq }): Change => ({
  kind: 'event',
  tenant,
  runId: 'r1',
  event: { runId: 'r1', seq, type: 'step', payload, createdAt: new Date(1_700_000_000_000 + seq) },
});

const output = (tenant: string, text: string): Change => ({
  kind: 'output',
  tenant,
  runId: 'r1',
  chunk: { runId: 'r1', stream: 'llm', offset: 0, text, final: false },
});

test('a change survives the trip as it was, dates included; a foreign entry is refused with a reason', () => {
  const changes: Change[] = [
    event(7),
    {
      kind: 'run',
      tenant: 't',
      runId: 'r',
      run: { id: 'r', task: 'x', status: 'RUNNING', version: 2, createdAt: new Date(1), updatedAt: new Date(2), eventShards: 1 },
    },
    { kind: 'budget', tenant: 't', runId: 'r', budget: { runId: 'r', cap: 5, spent: 1, remaining: 4, version: 1 } },
    {
      kind: 'lease',
      tenant: 't',
      unitId: 'u',
      lease: { unitId: 'u', owner: 'o', token: 3, acquiredAt: new Date(3), expiresAt: new Date(4), version: 1 },
    },
  ];
  for (const change of changes) expect(decodeChange(encodeChange(change))).toEqual(change);
  expect(() => decodeChange('{"kind":"nope"}')).toThrow('not a change');
  expect(() => decodeChange('{"kind":"event","tenant":"t","event":{"createdAt":"soon"}}')).toThrow('createdAt is not a date');
});

describe('the seal, the counts and the beats', () => {
  const SCOPE = 'runplane:t:changes';
  const rules = { secret: SECRET, scope: SCOPE, maxValueLength: 100, maxAgeMs: 60_000, now: () => 1_000_000 };
  const entry: Entry = { from: 'r1', n: 7, at: 1_000_000, kind: 'change', value: '{"kind":"event"}' };

  test('a sealed entry opens as it was; any field changed does not', () => {
    expect(openEntry(sealEntry(SECRET, SCOPE, entry), rules)).toEqual(entry);
    // Sealed for another table's stream (one secret shared by two tables): not this one's.
    expect(openEntry(sealEntry(SECRET, 'runplane:other:changes', entry), rules)).toBe('unauthenticated');
    // Bytes as XREAD gives them open alike; an oversized field is judged by its length only.
    expect(
      openEntry(
        sealEntry(SECRET, SCOPE, entry).map((field) => Buffer.from(field)),
        rules,
      ),
    ).toEqual(entry);
    for (const index of [3, 5, 7, 9, 11]) {
      const fields = sealEntry(SECRET, SCOPE, entry);
      fields[index] = index === 5 || index === 7 ? '8' : index === 9 ? 'resync' : `${fields[index]}x`;
      expect(openEntry(fields, rules)).toBe('unauthenticated');
    }
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, at: 1_000_000 - 61_000 }), rules)).toBe('stale');
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, at: 1_000_000 + 61_000 }), rules)).toBe('stale');
    expect(openEntry(sealEntry(SECRET, SCOPE, { ...entry, value: 'x'.repeat(101) }), rules)).toBe('oversized');
    expect(openEntry(['from', 'r1', 'c', '{}'], rules)).toBe('malformed');
    const fields = sealEntry(SECRET, SCOPE, entry);
    fields[13] = 'zz';
    expect(openEntry(fields, rules)).toBe('malformed');
  });

  test('sender counts: next, repeat, gap; a sender first seen mid-way is taken as it comes', () => {
    const counts = new SenderCounts();
    expect([
      counts.check('a', 5),
      counts.check('a', 6),
      counts.check('a', 6),
      counts.check('a', 3),
      counts.check('a', 9),
      counts.check('a', 10),
    ]).toEqual(['next', 'next', 'repeat', 'repeat', 'gap', 'next']);
    expect(counts.check('b', 1)).toBe('next');
  });

  test('heartbeats: a shard reader quiet past the bound is silent, forgotten past the lease; a replica reading no shard is never awaited', () => {
    let now = 0;
    const beats = new Heartbeats({ boundMs: 3_000, forgetMs: 7_000, now: () => now });
    beats.beat('reader', 2);
    beats.beat('idle', 0);
    now = 3_000;
    expect(beats.silent()).toEqual([]);
    now = 3_001;
    expect(beats.silent()).toEqual(['reader']);
    beats.beat('reader', 2);
    expect(beats.silent()).toEqual([]);
    now = 3_001 + 7_001;
    expect(beats.silent()).toEqual([]);
    beats.beat('leaving', 1);
    beats.beat('leaving', 0);
    now += 4_000;
    expect(beats.silent()).toEqual([]);
  });
});

describe("each tenant's share of the bytes sent", () => {
  test('a burst, then the rate; a change past it takes nothing; another tenant has its own', () => {
    let now = 0;
    const shares = new TenantShares(1_000, 2_000, () => now);
    expect(shares.take('a', 1_500)).toBe(true);
    expect(shares.take('a', 600)).toBe(false);
    // The refused take took nothing: 500 are left.
    expect(shares.take('a', 500)).toBe(true);
    expect(shares.take('a', 1)).toBe(false);
    expect(shares.take('b', 2_000)).toBe(true);
    now = 1_000;
    expect(shares.take('a', 1_000)).toBe(true);
    expect(shares.take('a', 1)).toBe(false);
    // Idle for a minute: a burst, never more.
    now = 61_000;
    expect(shares.take('a', 2_001)).toBe(false);
    expect(shares.take('a', 2_000)).toBe(true);
  });

  test('buckets are bounded: past the bound the one kept longest is forgotten', () => {
    const shares = new TenantShares(1_000, 2_000, () => 0);
    for (let i = 0; i <= MAX_TENANT_BUCKETS; i++) shares.take(`t${i}`, 2_000);
    expect(shares.tenants).toBe(MAX_TENANT_BUCKETS);
    // t0 was forgotten: it comes back with a whole burst; t2 was not, and has nothing left.
    expect(shares.take('t0', 2_000)).toBe(true);
    expect(shares.take('t2', 1)).toBe(false);
  });

  test("past its entry's bound or its tenant's share, a change goes as a notice, counted by tenant and why", () => {
    // 1 KiB entries; 2 KiB a second, so bursts of 4 KiB (the clock stands still).
    const shares = new EntryShares(1024, 2048, () => 0);
    expect(shares.valueOf(event(1))).toBe(encodeChange(event(1)));
    expect(shares.valueOf(output('a', 'x'.repeat(1025)))).toBeUndefined();
    // One byte past the bound in UTF-8, within it in characters.
    const base = Buffer.byteLength(encodeChange(output('a', '')));
    expect(shares.valueOf(output('a', 'é'.repeat(Math.ceil((1025 - base) / 2))))).toBeUndefined();
    expect(shares.valueOf(output('a', 'x'.repeat(1024 - base)))).toBeDefined();
    const whole = [1, 2, 3, 4, 5].map(() => shares.valueOf(output('a', 'x'.repeat(500))));
    expect(whole.filter((value) => value !== undefined).length).toBeLessThan(5);
    // Another tenant's go whole meanwhile.
    expect(shares.valueOf(output('b', 'x'.repeat(500)))).toBeDefined();
    expect(shares.notices.samples()).toEqual([
      ['a', 'size', 2],
      ['a', 'share', whole.filter((value) => value === undefined).length],
    ]);
  });

  test('notices are counted by name for so many tenants; the others together', () => {
    const counts = new NoticeCounts();
    for (let i = 0; i <= MAX_TENANTS_COUNTED; i++) counts.count(`t${i}`, 'share');
    counts.count('t1', 'size');
    const samples = counts.samples();
    expect(samples.filter(([tenant]) => tenant !== undefined)).toHaveLength(MAX_TENANTS_COUNTED + 1);
    expect(samples.find(([tenant]) => tenant === 't0')).toBeUndefined();
    expect(samples.at(-1)).toEqual([undefined, 'share', 1]);
    expect(samples.find(([tenant, reason]) => tenant === 't1' && reason === 'size')).toEqual(['t1', 'size', 1]);
  });
});

describe('notices', () => {
  test("a notice names the change's kind, tenant and thing, never its content; one not a replica's is refused", () => {
    expect(decodeNotice(noticeOf(event(3, 'acme', 'secret payload')))).toEqual({ kind: 'event', tenant: 'acme', id: 'r1' });
    expect(noticeOf(event(3, 'acme', 'secret payload'))).not.toContain('secret');
    expect(decodeNotice(noticeOf(output('acme', 'text')))).toEqual({ kind: 'output', tenant: 'acme', id: 'r1', stream: 'llm' });
    const lease: Change = {
      kind: 'lease',
      tenant: 't',
      unitId: 'u',
      lease: { unitId: 'u', owner: 'o', token: 3, acquiredAt: new Date(3), expiresAt: new Date(4), version: 1 },
    };
    expect(decodeNotice(noticeOf(lease))).toEqual({ kind: 'lease', tenant: 't', id: 'u' });
    for (const text of [
      'null',
      '{"kind":"nope","tenant":"t","id":"r"}',
      '{"kind":"event","id":"r"}',
      '{"kind":"output","tenant":"t","id":"r"}',
    ])
      expect(() => decodeNotice(text), text).toThrow('not a notice');
  });

  test("a turn's notices of one thing go once, its changes all", () => {
    const n = (id: string) => ({ kind: 'notice', value: id });
    const c = (id: string) => ({ kind: 'change', value: id });
    expect(withoutRepeatedNotices([n('a'), c('x'), n('a'), n('b'), c('x'), n('b'), n('a')])).toEqual([n('a'), c('x'), n('b'), c('x')]);
  });
});
