/**
 * Parsed expressions, kept. dynalite parses every request's expressions with a PEG parser,
 * which is the largest part of a small write's time in the engine: a worker sends the same
 * ConditionExpression (`attribute_not_exists(pk)`) with every append, and a fenced write the
 * same `#token = :fenceToken AND #claimUntil > :fenceNow` with another `:fenceNow` each time.
 *
 * A parse is kept by what it was parsed from and reused two ways:
 * - the very same expressions, names and values: its outcome (the parsed trees, or the refusal)
 *   as it was;
 * - the same expressions and names with other values of the same types: the trees with the new
 *   values in place of the old ones. dynalite's parser places a value's object in the tree and
 *   judges it by its type alone, except in `BETWEEN` (which compares the bounds) and
 *   `attribute_type` (which reads the type's name): expressions with either are parsed afresh
 *   for new values. Each new value is still checked as dynalite checks values, and only a parse
 *   that succeeded is reused this way.
 *
 * dynalite evaluates conditions, filters and projections without writing to their trees, so
 * those are shared. It writes into an UpdateExpression's tree as it applies it (each SET's
 * value is resolved in place), so an update's tree is kept as a copy made before it is applied,
 * and every request is handed a copy of its own.
 */

/** Parses kept at most, for each of the two ways (the least recently used goes first). */
const MAX_ENTRIES = 2_000;
/** A request whose expressions, names and values take more than this is parsed afresh (no large keys kept). */
const MAX_KEY_LENGTH = 2_048;

const FIELDS = ['ConditionExpression', 'KeyConditionExpression', 'FilterExpression', 'ProjectionExpression', 'UpdateExpression'] as const;
const PARSED = ['_condition', '_keyCondition', '_filter', '_projection', '_updates'] as const;
/** The tree dynalite writes into (see above): copied for each request. */
const WRITTEN: (typeof PARSED)[number] = '_updates';
/** Where a value's content, not only its type, decides the parse's outcome. */
const READS_VALUES = /between|attribute_type/i;

type Data = Record<string, unknown>;
type Validate = (data: Data, expressions?: string[]) => string | undefined;
/** dynalite's check of one attribute value: its refusal, or nothing. */
type CheckValue = (value: unknown) => string | undefined | null;
type Values = Record<string, unknown>;

interface Kept {
  message: string | undefined;
  parsed: unknown[];
  /** The values the trees hold (for a reuse with other values). */
  values: Values | undefined;
}

/**
 * A deep copy of a parse's trees, an object shared within them copied once (a value the update's
 * tree and the kept values both hold stays one object). Unlike structuredClone it keeps each
 * object's prototype: dynalite's parser makes null-prototype maps (`nestedPaths`) and looks
 * attribute names up in them, so an ordinary object would answer `constructor` as a path.
 * (An update tree holds the request's values, whose map keys are any attribute names.)
 */
function copied(tree: unknown, seen = new Map<object, unknown>()): unknown {
  if (tree === null || typeof tree !== 'object') return tree;
  const known = seen.get(tree);
  if (known !== undefined) return known;
  if (Array.isArray(tree)) {
    const copy: unknown[] = [];
    seen.set(tree, copy);
    for (const child of tree) copy.push(copied(child, seen));
    return copy;
  }
  const copy = Object.create(Object.getPrototypeOf(tree)) as Record<string, unknown>;
  seen.set(tree, copy);
  // Defined, not assigned: a map key `__proto__` (an attribute of that name) stays a key.
  for (const [name, child] of Object.entries(tree))
    Object.defineProperty(copy, name, { value: copied(child, seen), writable: true, enumerable: true, configurable: true });
  return copy;
}

/** A tree with each of `from`'s values replaced by `to`'s of the same name (copied only where something changed). */
function rebound(tree: unknown, swaps: Map<unknown, unknown>): unknown {
  const swapped = swaps.get(tree);
  if (swapped !== undefined) return swapped;
  if (Array.isArray(tree)) {
    let copy: unknown[] | undefined;
    tree.forEach((child, i) => {
      const next = rebound(child, swaps);
      if (next === child) return;
      copy ??= tree.slice();
      copy[i] = next;
    });
    return copy ?? tree;
  }
  if (tree === null || typeof tree !== 'object') return tree;
  let copy: Record<string, unknown> | undefined;
  for (const [name, child] of Object.entries(tree)) {
    const next = rebound(child, swaps);
    if (next === child) continue;
    copy ??= { ...(tree as Record<string, unknown>) };
    copy[name] = next;
  }
  return copy ?? tree;
}

/** Each value's name and type (`[[":a","N"],[":b","S"]]`), or undefined when one is not a single-typed value. */
function typesOf(values: unknown): string | undefined {
  if (values == null) return '[]';
  if (typeof values !== 'object') return undefined;
  const types: [string, string][] = [];
  for (const [name, value] of Object.entries(values)) {
    if (value === null || typeof value !== 'object') return undefined;
    const tags = Object.keys(value);
    if (tags.length !== 1) return undefined;
    types.push([name, tags[0] as string]);
  }
  // As JSON: no name, however it is spelled, can make two different sets of values look alike.
  return JSON.stringify(types);
}

/** A bounded map kept in the order of last use. */
function lru<V>() {
  const map = new Map<string, V>();
  return {
    get(key: string) {
      const found = map.get(key);
      if (found !== undefined) {
        map.delete(key);
        map.set(key, found);
      }
      return found;
    },
    set(key: string, value: V) {
      map.set(key, value);
      if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value as string);
    },
    get size() {
      return map.size;
    },
  };
}

/** `validate`, answering a request whose expressions it has parsed before from what it kept then. */
export function keepingParses(
  validate: Validate,
  checkValue: CheckValue = () => undefined,
): Validate & { readonly hits: number; readonly reboundHits: number; readonly size: number } {
  const exact = lru<Kept>();
  const byTypes = lru<Kept>();
  let hits = 0;
  let reboundHits = 0;

  const apply = (data: Data, parsed: unknown[]) =>
    PARSED.forEach((name, i) => {
      if (parsed[i] !== undefined) data[name] = name === WRITTEN ? copied(parsed[i]) : parsed[i];
    });

  /** The kept parse with `data`'s values in place of its own, if every one of them is a value dynalite takes. */
  const reuse = (data: Data, kept: Kept) => {
    const values = (data.ExpressionAttributeValues ?? {}) as Values;
    const swaps = new Map<unknown, unknown>();
    for (const [name, value] of Object.entries(values)) {
      const old = kept.values && Object.hasOwn(kept.values, name) ? kept.values[name] : undefined;
      // Every value the kept trees hold is replaced, or the parse is not reused.
      if (old === undefined || checkValue(value)) return false;
      swaps.set(old, value);
    }
    apply(
      data,
      kept.parsed.map((tree) => (tree === undefined ? undefined : rebound(tree, swaps))),
    );
    return true;
  };

  const keep: Validate = (data, expressions) => {
    const shape = [expressions ?? null, ...FIELDS.map((field) => data[field] ?? null), data.ExpressionAttributeNames ?? null];
    const key = JSON.stringify([...shape, data.ExpressionAttributeValues ?? null]);
    if (key.length > MAX_KEY_LENGTH) return validate(data, expressions);
    const found = exact.get(key);
    if (found) {
      hits++;
      apply(data, found.parsed);
      return found.message;
    }
    const types = typesOf(data.ExpressionAttributeValues);
    const readsValues = FIELDS.some((field) => typeof data[field] === 'string' && READS_VALUES.test(data[field] as string));
    const typesKey = types === undefined || readsValues ? undefined : JSON.stringify([...shape, types]);
    const similar = typesKey === undefined ? undefined : byTypes.get(typesKey);
    if (similar && reuse(data, similar)) {
      reboundHits++;
      return undefined;
    }
    const message = validate(data, expressions);
    const parsed = PARSED.map((name) => data[name]);
    const values = data.ExpressionAttributeValues as Values | undefined;
    // Copied together, so the copied trees still hold the copied values (a reuse swaps those).
    const kept: Kept = {
      message,
      ...(data[WRITTEN] === undefined ? { parsed, values } : (copied({ parsed, values }) as Pick<Kept, 'parsed' | 'values'>)),
    };
    exact.set(key, kept);
    if (typesKey !== undefined && message === undefined) byTypes.set(typesKey, kept);
    return message;
  };
  return Object.defineProperties(keep, {
    hits: { get: () => hits },
    reboundHits: { get: () => reboundHits },
    size: { get: () => exact.size },
  }) as Validate & { readonly hits: number; readonly reboundHits: number; readonly size: number };
}
