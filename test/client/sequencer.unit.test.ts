/** runEvents' bookkeeping as given/when/then: what it drops, reads from the table, announces and hands out late. */
import { describe, expect, test } from 'vitest';
import { MAX_MISSING_RANGES, Sequencer } from '../../packages/client/src/sequencer.ts';

const event = (seq: number, { type = 'step', late = false, missingBefore = [] as { from: number; to: number }[] } = {}) => ({
  seq,
  type,
  late,
  missingBefore,
});

describe('without a type filter (seqs are contiguous)', () => {
  test.each([
    { given: 5, when: event(6), expected: { kind: 'next', holes: [] } },
    { given: 5, when: event(5), expected: { kind: 'drop' } },
    { given: 5, when: event(2), expected: { kind: 'drop' } },
    { given: 5, when: event(9), expected: { kind: 'next', holes: [{ from: 6, to: 8 }] } },
    // The server's own announcement is covered by the contiguity check.
    { given: 5, when: event(8, { missingBefore: [{ from: 6, to: 7 }] }), expected: { kind: 'next', holes: [{ from: 6, to: 7 }] } },
    { given: 5, when: event(3, { late: true }), expected: { kind: 'drop' } },
  ])('at $given, event $when.seq: $expected.kind', ({ given, when, expected }) => {
    expect(new Sequencer(given).judge(when)).toEqual(expected);
  });

  test('a hole read from the table: found seqs handed out in order, the rest announced with the next, and late once', () => {
    const sequencer = new Sequencer(5);
    const verdict = sequencer.judge(event(10));
    expect(verdict).toEqual({ kind: 'next', holes: [{ from: 6, to: 9 }] });
    const holes = [{ from: 6, to: 9 }];
    // The table has 7 and 9 (6 and 8 are still missing).
    expect(sequencer.fromTable(event(7), holes)).toEqual(event(7, { missingBefore: [{ from: 6, to: 6 }] }));
    expect(sequencer.fromTable(event(7), holes)).toBeUndefined();
    expect(sequencer.fromTable(event(9), holes)).toEqual(event(9, { missingBefore: [{ from: 8, to: 8 }] }));
    expect(sequencer.inOrder(event(10), holes)).toEqual(event(10));
    expect(sequencer.resumeAfter).toBe(10);
    expect(sequencer.stillMissing).toEqual([
      { from: 6, to: 6 },
      { from: 8, to: 8 },
    ]);
    // 8 comes late from the feed: handed out once, marked late.
    expect(sequencer.judge(event(8, { late: true }))).toEqual({ kind: 'late' });
    expect(sequencer.late(event(8, { late: true }))).toEqual(event(8, { late: true }));
    expect(sequencer.judge(event(8, { late: true }))).toEqual({ kind: 'drop' });
    expect(sequencer.late(event(8))).toBeUndefined();
    // 6 found in the table on a later look: late too.
    expect(sequencer.late(event(6))).toEqual(event(6, { late: true }));
    expect(sequencer.stillMissing).toEqual([]);
  });

  test('an event after a hole nobody filled carries the whole hole', () => {
    const sequencer = new Sequencer(0);
    expect(sequencer.inOrder(event(4), [{ from: 1, to: 3 }])).toEqual(event(4, { missingBefore: [{ from: 1, to: 3 }] }));
    expect(sequencer.inOrder(event(5), [])).toEqual(event(5));
  });

  test(`at most ${MAX_MISSING_RANGES} missing ranges are remembered: the oldest are forgotten`, () => {
    const sequencer = new Sequencer(0);
    for (let seq = 2; seq <= 2 * (MAX_MISSING_RANGES + 10); seq += 2) sequencer.inOrder(event(seq), [{ from: seq - 1, to: seq - 1 }]);
    expect(sequencer.stillMissing).toHaveLength(MAX_MISSING_RANGES);
    expect(sequencer.late(event(1))).toBeUndefined();
    expect(sequencer.late(event(2 * (MAX_MISSING_RANGES + 10) - 1))).toMatchObject({ late: true });
  });
});

describe('with a type filter (gaps are other types)', () => {
  const types = new Set(['tool.called']);

  test('a gap is normal; only the server says what is missing', () => {
    const sequencer = new Sequencer(5, types);
    expect(sequencer.judge(event(9, { type: 'tool.called' }))).toEqual({ kind: 'next', holes: [] });
    expect(sequencer.judge(event(9, { type: 'tool.called', missingBefore: [{ from: 2, to: 7 }] }))).toEqual({
      kind: 'next',
      holes: [{ from: 6, to: 7 }],
    });
  });

  test('rows of other types found in a hole are not handed out, yet they are not missing', () => {
    const sequencer = new Sequencer(5, types);
    const holes = [{ from: 6, to: 8 }];
    expect(sequencer.fromTable(event(6, { type: 'other' }), holes)).toBeUndefined();
    expect(sequencer.fromTable(event(7, { type: 'tool.called' }), holes)).toEqual(event(7, { type: 'tool.called' }));
    expect(sequencer.inOrder(event(9, { type: 'tool.called' }), holes)).toEqual(
      event(9, { type: 'tool.called', missingBefore: [{ from: 8, to: 8 }] }),
    );
    // 8 turns out to be another type: no longer owed, and not handed out.
    expect(sequencer.late(event(8, { type: 'other' }))).toBeUndefined();
    expect(sequencer.stillMissing).toEqual([]);
  });
});
