/**
 * Parsed expressions, kept. dynalite parses every request's expressions with a PEG parser,
 * which is the largest part of a small write's time in the engine (a fifth of a
 * two-item transaction's): a worker sends the same ConditionExpression (`attribute_not_exists(pk)`)
 * with every append. The parse of one set of expressions, names and values is deterministic,
 * so its outcome (the parsed trees, or the refusal) is kept by exactly what it was parsed from,
 * and reused. The trees are only read afterwards (dynalite evaluates conditions, filters and
 * projections without writing to them); an UpdateExpression, whose tree dynalite applies to
 * items, is not kept.
 */

/** Parses kept at most (the least recently used goes first). */
const MAX_ENTRIES = 2_000;
/** A request whose expressions, names and values take more than this is parsed afresh (no large keys kept). */
const MAX_KEY_LENGTH = 2_048;

const FIELDS = ['ConditionExpression', 'KeyConditionExpression', 'FilterExpression', 'ProjectionExpression'] as const;
const PARSED = ['_condition', '_keyCondition', '_filter', '_projection'] as const;

type Data = Record<string, unknown>;
type Validate = (data: Data, expressions?: string[]) => string | undefined;

interface Kept {
  message: string | undefined;
  parsed: unknown[];
}

/** `validate`, answering a request whose expressions it has parsed before from what it kept then. */
export function keepingParses(validate: Validate): Validate & { readonly hits: number; readonly size: number } {
  const kept = new Map<string, Kept>();
  let hits = 0;
  const keep: Validate = (data, expressions) => {
    if (data.UpdateExpression != null) return validate(data, expressions);
    const key = JSON.stringify([
      expressions ?? null,
      ...FIELDS.map((field) => data[field] ?? null),
      data.ExpressionAttributeNames ?? null,
      data.ExpressionAttributeValues ?? null,
    ]);
    if (key.length > MAX_KEY_LENGTH) return validate(data, expressions);
    const found = kept.get(key);
    if (found) {
      hits++;
      kept.delete(key);
      kept.set(key, found);
      PARSED.forEach((name, i) => {
        if (found.parsed[i] !== undefined) data[name] = found.parsed[i];
      });
      return found.message;
    }
    const message = validate(data, expressions);
    kept.set(key, { message, parsed: PARSED.map((name) => data[name]) });
    if (kept.size > MAX_ENTRIES) kept.delete(kept.keys().next().value as string);
    return message;
  };
  return Object.defineProperties(keep, {
    hits: { get: () => hits },
    size: { get: () => kept.size },
  }) as Validate & { readonly hits: number; readonly size: number };
}
