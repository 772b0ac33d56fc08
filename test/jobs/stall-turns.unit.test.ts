/** The stall round's order: expired claims in turns by tenant, each tenant's oldest first, bounded. */
import { describe, expect, test } from 'vitest';
import { inTurns } from '../../src/jobs/stall-turns.ts';

/** 'a1' is tenant a's claim 1; a read lists them oldest first. */
const read = (...claims: string[]) => claims.map((claim) => ({ tenant: claim.slice(0, 1), claim }));
const names = (items: { claim: string }[]) => items.map((item) => item.claim);

describe('inTurns', () => {
  test.each([
    { given: [], places: 4, expected: [] },
    { given: ['a1', 'a2', 'a3'], places: 10, expected: ['a1', 'a2', 'a3'] },
    // One tenant's backlog ahead of another's claim: the other's comes in the first turn.
    { given: ['a1', 'a2', 'a3', 'a4', 'b1'], places: 10, expected: ['a1', 'b1', 'a2', 'a3', 'a4'] },
    { given: ['a1', 'a2', 'a3', 'a4', 'b1'], places: 2, expected: ['a1', 'b1'] },
    // Within a turn, tenants by their oldest claim; each tenant's own in order.
    { given: ['b1', 'a1', 'a2', 'c1', 'b2', 'c2', 'c3'], places: 10, expected: ['b1', 'a1', 'c1', 'b2', 'a2', 'c2', 'c3'] },
    // Fewer places than tenants: the tenants with the oldest claims first.
    { given: ['a1', 'b1', 'c1', 'a2'], places: 2, expected: ['a1', 'b1'] },
    { given: ['a1', 'a2'], places: 0, expected: [] },
  ])('$given, $places places: $expected', ({ given, places, expected }) => {
    expect(names(inTurns(read(...given), places))).toEqual(expected);
  });

  test('a backlog of thousands still gets a place each round', () => {
    const backlog = read(...Array.from({ length: 4_000 }, (_, i) => `a${i}`), 'b1', 'c1');
    const turns = names(inTurns(backlog, 400));
    expect(turns.slice(0, 4)).toEqual(['a0', 'b1', 'c1', 'a1']);
    expect(turns).toHaveLength(400);
  });
});
