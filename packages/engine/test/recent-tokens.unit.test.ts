/** The filters that let a new ClientRequestToken skip its read: never wrong about a used token, rarely about a new one. */
import { describe, expect, test } from 'vitest';
import { createRecentTokens } from '../src/transactions/recent-tokens.ts';

const WINDOW_MS = 10 * 60_000;
const start = Date.UTC(2026, 11, 4, 12, 0, 0);

describe('recent tokens', () => {
  test('until the stored tokens are loaded, every token may have been used', () => {
    const recent = createRecentTokens(WINDOW_MS);
    expect(recent.mayHave('never-added')).toBe(true);
    recent.loaded();
    expect(recent.mayHave('never-added')).toBe(false);
  });

  test('a token added is always a "maybe", whatever minute of its window it was used in', () => {
    const recent = createRecentTokens(WINDOW_MS);
    recent.loaded();
    const tokens = Array.from({ length: 20_000 }, (_, i) => `${i}-${crypto.randomUUID()}`);
    for (const [i, token] of tokens.entries()) recent.add(token, start + i * 25);
    expect(tokens.filter((token) => !recent.mayHave(token))).toEqual([]);
  });

  test('of 50,000 tokens never used, fewer than one in a thousand is a "maybe" beside 50,000 used ones', () => {
    const recent = createRecentTokens(WINDOW_MS);
    recent.loaded();
    for (let i = 0; i < 50_000; i++) recent.add(crypto.randomUUID(), start);
    // Tokens alike but for their last characters, as a client's counter makes them.
    let maybes = 0;
    for (let i = 0; i < 50_000; i++) if (recent.mayHave(`request-${i}`)) maybes++;
    expect(maybes).toBeLessThan(50);
  });

  test('a minute is dropped once all its tokens are past their window, so at most 12 are kept', () => {
    const recent = createRecentTokens(WINDOW_MS);
    recent.loaded();
    recent.add('early', start);
    for (let minute = 1; minute <= 10; minute++) recent.add(`at-${minute}`, start + minute * 60_000);
    // 'early' is still within its window at the last of these.
    expect(recent.mayHave('early')).toBe(true);
    for (let minute = 11; minute <= 30; minute++) recent.add(`at-${minute}`, start + minute * 60_000);
    expect(recent.stats().minutes).toBeLessThanOrEqual(12);
    expect(recent.mayHave('early')).toBe(false);
    expect(recent.mayHave('at-30')).toBe(true);
    expect(recent.mayHave('at-21')).toBe(true);
  });
});
