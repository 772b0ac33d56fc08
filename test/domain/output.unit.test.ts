/** Output offsets count code points: the counting and slicing agree with JavaScript's own iteration of a string. */
import { describe, expect, test } from 'vitest';
import { codePoints, slicePoints, unitIndex } from '../../src/domain/output.ts';

const texts = [
  '',
  'plain ascii',
  'wörld ·',
  '🙂',
  'a🙂b🙂🙂c',
  '\ud83d', // a lone high surrogate
  '\ude42x', // a lone low surrogate first
  'x\ud83d',
  '🙂\ud83d🙂',
  '家族👨‍👩‍👧 (joined: several code points)',
  `${'a'.repeat(70_000)}🙂${'b'.repeat(70_000)}`,
];

describe('code points', () => {
  test.each(texts.map((t) => [JSON.stringify(t.slice(0, 24)), t] as const))('%s: counted as [...text] counts them', (_, text) => {
    expect(codePoints(text)).toBe([...text].length);
  });

  test.each(texts.map((t) => [JSON.stringify(t.slice(0, 24)), t] as const))('%s: sliced as [...text] slices them', (_, text) => {
    const points = [...text];
    const at = [0, 1, 2, Math.floor(points.length / 2), points.length - 1, points.length, points.length + 5].filter((n) => n >= 0);
    for (const from of at) {
      expect(unitIndex(text, from)).toBe(points.slice(0, from).join('').length);
      expect(slicePoints(text, from)).toBe(points.slice(from).join(''));
      for (const to of at.filter((n) => n >= from)) expect(slicePoints(text, from, to)).toBe(points.slice(from, to).join(''));
    }
  });
});
