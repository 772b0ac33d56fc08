/** The zod rules inputs are validated with; a refusal names the field and what it must be. */
import { z } from 'zod';
import {
  EVENT_TYPE_PATTERN,
  EVENT_TYPE_RULE,
  hasReservedKey,
  hasUnstorableNumber,
  ID_PATTERN,
  ID_RULE,
  MAX_INT,
  MAX_OWNER_LENGTH,
  MAX_PAYLOAD_DEPTH,
  nestsDeeperThan,
  RESERVED_PAYLOAD_KEY,
} from '../domain/limits.ts';

export const id = z.string().regex(ID_PATTERN, `must be ${ID_RULE}`);
export const eventType = z.string().regex(EVENT_TYPE_PATTERN, `must be ${EVENT_TYPE_RULE}`);
export const amount = z.number().int().min(0, 'must not be negative').max(MAX_INT);
export const positive = z.number().int().min(1, 'must be at least 1').max(MAX_INT);
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to refuse them
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to refuse them
const CONTROL_OR_BREAK = /[\u0000-\u001f\u007f]/;
/** Text of 1 to `max` characters; tabs and line breaks only where `multiline`. */
export const text = (max: number, { multiline = false } = {}) =>
  z
    .string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .refine(
      (s) => !(multiline ? CONTROL : CONTROL_OR_BREAK).test(s),
      multiline ? 'must not contain control characters' : 'must be one line without control characters',
    );
/**
 * Nothing a person could read: spaces, characters that show as nothing (zero-width, byte order
 * marks), marks with no letter to sit on (variation selectors, the combining grapheme joiner),
 * and the blanks that are letters or symbols by category (the Hangul fillers, the Braille blank).
 */
const INVISIBLE_ONLY = /^[\s\p{Zs}\p{Cf}\p{Mn}\p{Me}\u115F\u1160\u3164\uFFA0\u2800]*$/u;
/** Half of a surrogate pair without its other half: no UTF-8 for it (a store would keep U+FFFD instead). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** A name that says who (a worker, a lease owner, an approver): readable, and text that survives UTF-8. */
export const owner = text(MAX_OWNER_LENGTH)
  .refine((s) => !INVISIBLE_ONLY.test(s), 'must not be only spaces or invisible characters')
  .refine((s) => !LONE_SURROGATE.test(s), 'must be well-formed Unicode (no lone surrogate)');
export const payload = z
  .unknown()
  .refine((value) => !nestsDeeperThan(value, MAX_PAYLOAD_DEPTH), `must not nest deeper than ${MAX_PAYLOAD_DEPTH} levels`)
  .refine(
    (value) => !hasUnstorableNumber(value),
    'must only hold numbers DynamoDB can store: 0, or a magnitude from 1e-130 to below 1e126 (no NaN or Infinity)',
  )
  .refine((value) => !hasReservedKey(value), `must not use the object key ${RESERVED_PAYLOAD_KEY} (JavaScript reserves it; rename it)`);

/** A run claim's fencing token, as the fenced writes take it. */
export const fencingToken = z.number().int().min(1, 'must be at least 1');
export const fencingTokenDescription =
  "The run claim's token (claimRun): the write lands only while it is the run's live claim, else ClaimLost and nothing is written.";
