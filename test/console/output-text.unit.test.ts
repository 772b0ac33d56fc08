/**
 * The text a console page keeps of one output stream: tokens grow the last piece, the start goes
 * once the bound is reached (whole pieces, counted in `trimmed`), and `end` stays the stream's
 * offset in code points, where a reader resumes.
 */
import { expect, test } from 'vitest';
import { codePoints, MAX_SHOWN_POINTS, OutputText, PIECE_POINTS } from '../../src/console/output-text.ts';

/** What a text node does here: holds text, and leaves the page when removed. */
function page() {
  const shown: Array<{ data: string; removed: boolean }> = [];
  const text = (start?: number, max?: number, size?: number) =>
    new OutputText(
      (data) => {
        const piece = {
          data,
          removed: false,
          appendData(more: string) {
            piece.data += more;
          },
          remove() {
            piece.removed = true;
          },
        };
        shown.push(piece);
        return piece;
      },
      start,
      max,
      size,
    );
  const visible = () =>
    shown
      .filter((p) => !p.removed)
      .map((p) => p.data)
      .join('');
  return { text, visible, shown };
}

test('tokens append to one piece until it is full, counted in code points', () => {
  const { text, visible, shown } = page();
  const output = text(0, 100, 8);
  for (const token of ['ab', '🙂', 'cde', 'fgh', 'ij']) output.append(token);
  expect(visible()).toBe('ab🙂cdefghij');
  expect(output.end).toBe(11);
  expect(codePoints('ab🙂')).toBe(3);
  // 8 code points in the first piece, then a second one: a surrogate pair is never split.
  expect(shown.map((p) => p.data)).toEqual(['ab🙂cdefg', 'hij']);
});

test('past the bound the oldest pieces go, and trimmed + shown is the stream offset', () => {
  const { text, visible } = page();
  const output = text(0, 20, 5);
  let all = '';
  for (let i = 0; i < 40; i++) {
    const token = `${i % 10}🙂`;
    all += token;
    output.append(token);
    expect(output.shownPoints).toBeLessThanOrEqual(20);
    expect(output.end).toBe(codePoints(all));
    expect(output.trimmed + codePoints(visible())).toBe(output.end);
    expect(all.endsWith(visible())).toBe(true);
  }
  expect(output.trimmed).toBeGreaterThan(0);
  expect(output.shownPoints).toBeGreaterThan(20 - 5);
});

test('one text larger than the bound is cut into pieces and only its end is kept', () => {
  const { text, visible } = page();
  const output = text(0, 20, 5);
  const big = `${'x'.repeat(97)}end`;
  output.append(big);
  expect(output.shownPoints).toBe(20);
  expect(visible()).toBe(big.slice(-20));
  expect(output.end).toBe(100);
});

test('a page that starts after the start of a long stream counts from there', () => {
  const { text } = page();
  const output = text(5_000);
  output.append('tail');
  expect(output.trimmed).toBe(5_000);
  expect(output.end).toBe(5_004);
});

test('the real bound: a stream past 1,000,000 characters keeps at most that many, in pieces of PIECE_POINTS', () => {
  const { text, visible } = page();
  const output = text();
  const token = 'token 🙂 ';
  const perToken = codePoints(token);
  let written = 0;
  while (written <= MAX_SHOWN_POINTS + 3 * PIECE_POINTS) {
    output.append(token.repeat(1_000));
    written += perToken * 1_000;
  }
  expect(output.end).toBe(written);
  expect(output.shownPoints).toBeLessThanOrEqual(MAX_SHOWN_POINTS);
  expect(output.shownPoints).toBeGreaterThan(MAX_SHOWN_POINTS - PIECE_POINTS);
  expect(output.trimmed).toBe(written - output.shownPoints);
  expect(codePoints(visible())).toBe(output.shownPoints);
  expect(output.pieceCount).toBeLessThanOrEqual(Math.ceil(MAX_SHOWN_POINTS / PIECE_POINTS) + 1);
});
