/**
 * Live output: a run's named streams of text (what a model writes, token by token; a tool's
 * stdout), beside its events. A stream is one text; a write appends at `offset`, the text's
 * length before it, counted in Unicode code points (what Python's len() counts, and
 * `[...text].length` in JavaScript), so no offset can fall inside a character.
 */

/** Text of one stream from `offset` on. */
export interface OutputChunk {
  runId: string;
  stream: string;
  offset: number;
  text: string;
  /** The stream ends with this text: nothing more can be written to it. */
  final: boolean;
}

/** A stream of a run, as long as it is now. */
export interface OutputStream {
  stream: string;
  /** Code points written (accepted: some may not be durable yet). */
  length: number;
  final: boolean;
}

/** A surrogate pair: one code point in two UTF-16 units. */
const PAIR = /[\ud800-\udbff][\udc00-\udfff]/g;
const SURROGATE = /[\ud800-\udfff]/;

/** How many code points a text has (the regular expression engine's scan, several times a loop's speed on long text). */
export function codePoints(text: string): number {
  let pairs = 0;
  PAIR.lastIndex = 0;
  while (PAIR.exec(text)) pairs++;
  return text.length - pairs;
}

/** The index in UTF-16 units of code point `points` of `text` (its length when past the end). */
export function unitIndex(text: string, points: number): number {
  // Most text has no surrogate: a code point is a unit.
  if (!SURROGATE.test(text)) return Math.min(points, text.length);
  let i = 0;
  for (let seen = 0; seen < points && i < text.length; seen++) {
    const unit = text.charCodeAt(i);
    i += unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
  }
  return i;
}

/** `text` from code point `from` (to code point `to`). */
export function slicePoints(text: string, from: number, to?: number): string {
  const start = unitIndex(text, from);
  return to === undefined ? text.slice(start) : text.slice(start, start + unitIndex(text.slice(start), to - from));
}

/** Whether a text is well-formed Unicode (a lone surrogate cannot be stored as UTF-8, nor counted as a code point). */
export const isWellFormed = (text: string) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);

/** The code-point offset after a chunk: where the next one starts. */
export const endOf = (chunk: Pick<OutputChunk, 'offset' | 'text'>) => chunk.offset + codePoints(chunk.text);

export const DEFAULT_OUTPUT_FLUSH_MS = 250;
export const DEFAULT_OUTPUT_FLUSH_BYTES = 16 * 1024;
/** A stream's length at most (code points), unless configured otherwise. */
export const DEFAULT_MAX_OUTPUT_LENGTH = 16 * 1024 * 1024;
/** Largest text of one chunk row, in UTF-8 bytes (DynamoDB's item limit is 400 KB). */
export const MAX_CHUNK_BYTES = 64 * 1024;
