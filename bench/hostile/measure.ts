/**
 * What a hostile tenant's attack costs another tenant, measured the same way by the hostile
 * tests (test/e2e/hostile-*.test.ts, which bound it loosely) and `npm run bench -- hostile`
 * (which reports it against the 500 ms target): the other tenant's request timed one after the
 * other before, during and after the attack, and the server's resident set while it lasts.
 * A plain module (no test runner), so that both can import it.
 */

export interface GraphQLErrorShape {
  message: string;
  extensions?: { code?: string; [key: string]: unknown };
}

// biome-ignore lint/suspicious/noExplicitAny: callers read deep into responses by path
export type GraphQLAnswer = { data?: any; errors?: GraphQLErrorShape[] };

/** A GraphQL client of `url`: one POST per request, the key as a bearer token; an answer that is not JSON throws, naming the status. */
export const graphql =
  (url: string) =>
  async (query: string, variables: Record<string, unknown>, key: string): Promise<GraphQLAnswer> => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ query, variables }),
    });
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`HTTP ${response.status}, not JSON: ${text.slice(0, 300)}`);
    }
  };

/** What a response says: answered whole, or the codes of its errors. */
export const outcomeOf = (response: GraphQLAnswer) =>
  response.errors?.length ? [...new Set(response.errors.map((e) => e.extensions?.code ?? 'no code'))].sort().join(',') : 'answered';

/** The 99th percentile of `samples` (ms): with fewer than 100 of them, the largest but one, or the largest. */
export function p99(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

/** How long `request` took (ms); Infinity when it failed (the server gone, say). */
async function took(request: () => Promise<unknown>) {
  const started = performance.now();
  try {
    await request();
  } catch {
    return Number.POSITIVE_INFINITY;
  }
  return performance.now() - started;
}

/** How long `request` takes, `times` times one after the other (ms each). */
export async function timed(request: () => Promise<unknown>, times: number) {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) samples.push(await took(request));
  return samples;
}

/** Whether `promise` has settled, kept up to date. */
function settled(promise: Promise<unknown>) {
  const state = { done: false };
  const done = () => {
    state.done = true;
  };
  void promise.then(done, done);
  return state;
}

/**
 * `request` one after the other, `paceMs` apart, until `until` settles (and at least `least`
 * times): how long each took (ms), added to `samples`.
 */
export async function timedWhile(
  request: () => Promise<unknown>,
  until: Promise<unknown>,
  { least = 5, paceMs = 0, samples = [] as number[] } = {},
) {
  const state = settled(until);
  while (!state.done || samples.length < least) {
    samples.push(await took(request));
    if (paceMs) await new Promise((resolve) => setTimeout(resolve, paceMs));
  }
  return samples;
}

/** The largest value `read` gave, read every `everyMs` until `until` settles (a failed read counts as none). */
export async function peakWhile(read: () => Promise<number>, until: Promise<unknown>, everyMs = 100) {
  const state = settled(until);
  let peak = await read().catch(() => 0);
  while (!state.done) {
    await new Promise((resolve) => setTimeout(resolve, everyMs));
    peak = Math.max(peak, await read().catch(() => peak));
  }
  return peak;
}

export interface AttackFigures<T> {
  /** What the attack returned. */
  outcome: T;
  /** The other tenant's request, alone before the attack, during it, and alone after it (ms each). */
  before: number[];
  during: number[];
  after: number[];
  /** Its unloaded p99: the larger of before's and after's (a slow moment of the machine in either counts against the attack less). */
  baselineP99: number;
  p99: number;
  /** The server's resident set before the attack and its peak during it (bytes). */
  rssBefore: number;
  rssPeak: number;
}

/**
 * `attack` under measurement: the other tenant's `request` `samples` times alone, then over and
 * over while the attack lasts, then `samples` times alone again; the server's `rss` read
 * meanwhile. Alone, `settle` requests go first, not counted: the first ones after a start or
 * an attack meet code not yet optimised, or the attack's garbage being collected (100 ms and
 * more, where the next ones take 10). An attack lasts until the work it made the server do
 * is done, so that `after` is the server unloaded. A server that died during the attack shows
 * as Infinity in `during` and `after`.
 */
export async function underAttack<T>({
  request,
  attack,
  rss,
  samples = 20,
  settle = 10,
  paceMs = 0,
}: {
  request: () => Promise<unknown>;
  /** Given the samples taken during it so far, so that it can last until the other tenant was served under it a few times. */
  attack: (during: readonly number[]) => Promise<T>;
  rss: () => Promise<number>;
  samples?: number;
  settle?: number;
  /** A pause between the other tenant's requests during the attack (none: one right after the other). */
  paceMs?: number;
}): Promise<AttackFigures<T>> {
  await timed(request, settle);
  const before = await timed(request, samples);
  const rssBefore = await rss();
  const during: number[] = [];
  const attacked = attack(during);
  const [, rssPeak, outcome] = await Promise.all([
    timedWhile(request, attacked, { paceMs, samples: during }),
    peakWhile(rss, attacked),
    attacked,
  ]);
  await timed(request, settle);
  const after = await timed(request, samples);
  const baselineP99 = Math.max(p99(before), p99(after));
  return { outcome, before, during, after, baselineP99, p99: p99(during), rssBefore, rssPeak };
}

/** The figures as a line of a test's or the bench's log. */
export const summary = (figures: AttackFigures<unknown>) => ({
  baselineP99: Number(figures.baselineP99.toFixed(1)),
  p99: Number(figures.p99.toFixed(1)),
  ratio: Number((figures.p99 / figures.baselineP99).toFixed(2)),
  samples: figures.during.length,
  rssGrowthMiB: Number(((figures.rssPeak - figures.rssBefore) / 2 ** 20).toFixed(1)),
});

/** Waits until `during` has `more` samples past those it has now: the other tenant served that many times under the attack. */
export const servedMore = (during: readonly number[], more: number) => {
  const from = during.length;
  return until(() => during.length >= from + more, `${more} requests of the other tenant under the attack`, { timeoutMs: 120_000 });
};

/** Waits until `condition` holds, checking every `intervalMs`; past `timeoutMs` it throws naming `what`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, { timeoutMs = 30_000, intervalMs = 20 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
