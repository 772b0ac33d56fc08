/**
 * The attacks a hostile review found, as a hostile tenant's clients make them: shared by the
 * hostile tests (at a scale that still broke the code before the fixes) and `npm run bench --
 * hostile` (at the findings' own). Each takes the GraphQL client or the server's address and
 * its scale, and returns what the attacker was answered; bench/hostile/measure.ts times
 * another tenant meanwhile.
 */
import WebSocket from 'ws';
import { defaultRetry, delayFor, sleep } from '../../packages/client/src/retry.ts';
import { type GraphQLAnswer, type GraphQLErrorShape, outcomeOf, servedMore, until } from './measure.ts';

export type Gql = (query: string, variables: Record<string, unknown>, key: string) => Promise<GraphQLAnswer>;

const aliased = (selection: string, count: number, prefix = 'a') =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}: ${selection}`).join('\n');

/** `clients` clients sending `queries` one after the other (each the same list): every answer's outcome, and the answers. */
async function clientsSending(gql: Gql, key: string, clients: number, queries: string[], variables: Record<string, unknown> = {}) {
  const outcomes: string[] = [];
  const answers: GraphQLAnswer[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (const query of queries) {
        const answer = await gql(query, variables, key).catch((err: Error) => err);
        outcomes.push(answer instanceof Error ? `failed: ${answer.message}` : outcomeOf(answer));
        if (!(answer instanceof Error)) answers.push(answer);
      }
    }),
  );
  return { outcomes, answers };
}

/** Finding 5: a page of `runs` runs with their claims and budgets, under `aliases` aliases. */
export const listedClaims = (runs: number, aliases: number) =>
  `{ ${aliased(`runs(first: ${runs}) { edges { node { claim { token } budget { spent } } } }`, aliases)} }`;

/** Finding 5: `clients` clients each listing the tenant's claimed runs `requests` times (a READ key is enough). */
export const listClaims = (
  gql: Gql,
  key: string,
  { runs, aliases, clients, requests }: Record<'runs' | 'aliases' | 'clients' | 'requests', number>,
) =>
  clientsSending(
    gql,
    key,
    clients,
    Array.from({ length: requests }, () => listedClaims(runs, aliases)),
  );

/**
 * Finding 1: a run's output streams under `aliases` aliases, every listed run's streams, and
 * the same aliased: what `clients` clients of a READ key each send, in that order.
 */
export const outputsQueries = (aliases: number) => [
  `query($id: ID!) { ${aliased('run(id: $id) { outputs { length } }', aliases)} }`,
  '{ runs(first: 500) { edges { node { outputs { length } } } } }',
  `{ ${aliased('runs(first: 500) { edges { node { outputs { length } } } }', aliases)} }`,
];

export const readOutputs = (gql: Gql, key: string, { runId, aliases, clients }: { runId: string; aliases: number; clients: number }) =>
  clientsSending(gql, key, clients, outputsQueries(aliases), { id: runId });

/** A graphql-ws connection of `key`'s tenant that reads nothing once acknowledged: the kernel's buffers fill, then the server's. */
export async function unreadSocket(url: string, key: string) {
  const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const acknowledged = new Promise<void>((resolve) => socket.once('message', () => resolve()));
  socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${key}` } }));
  await acknowledged;
  // ws's own pause: its receiver would otherwise resume the socket when it drains.
  socket.pause();
  return {
    socket,
    subscribe: (id: string, query: string) => socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables: {} } })),
  };
}

/**
 * Finding 2: `sockets` new connections that stop reading, each with `subscriptions` of
 * `subscription`; lasts until every subscription of the server (`open`: its count) is open and
 * the other tenant was served `served` times more (then `whileOpen` runs). Then, unless `keep`,
 * it cuts the sockets and waits for the server to let their subscriptions go and, when `idle`
 * is given, to say it is done with them (reads they queued may still run); with `keep`, the
 * caller cuts them. Returns the sockets.
 */
export async function unreadFeeds(
  during: readonly number[],
  {
    url,
    key,
    sockets,
    subscriptions,
    subscription,
    open,
    openAtLeast = sockets * subscriptions,
    served = 30,
    whileOpen,
    idle,
    keep = false,
  }: {
    url: string;
    key: string;
    sockets: number;
    subscriptions: number;
    subscription: string;
    open: () => Promise<number>;
    openAtLeast?: number;
    served?: number;
    whileOpen?: () => Promise<void>;
    idle?: () => Promise<boolean>;
    keep?: boolean;
  },
) {
  const opened: WebSocket[] = [];
  // Cut, not closed: a paused socket would not take the close handshake.
  const cut = () => {
    for (const socket of opened) socket.terminate();
  };
  try {
    for (let s = 0; s < sockets; s++) {
      const unread = await unreadSocket(url, key);
      opened.push(unread.socket);
      for (let i = 0; i < subscriptions; i++) unread.subscribe(`u${i}`, subscription);
    }
    // A server that died meanwhile ends the wait: the caller's checks say so.
    await until(async () => (await open().catch(() => Number.POSITIVE_INFINITY)) >= openAtLeast, 'every subscription to be open', {
      timeoutMs: 60_000,
    });
    await servedMore(during, served);
    await whileOpen?.();
  } catch (err) {
    cut();
    throw err;
  }
  if (keep) return opened;
  cut();
  // Their subscriptions let go (or the server gone): what is measured next is the server unloaded.
  const left = openAtLeast - sockets * subscriptions;
  await until(async () => (await open().catch(() => 0)) <= left, "the cut sockets' subscriptions to end", { timeoutMs: 60_000 });
  if (idle) await until(() => idle().catch(() => true), 'the server to be done with the cut sockets', { timeoutMs: 60_000 });
  return opened;
}

export const APPEND_OUTPUT = `mutation($input: AppendOutputInput!) {
  appendOutput(input: $input) { __typename ... on OutputChunk { offset } ... on Error { message } }
}`;

/**
 * Finding 4: `writers` writers appending texts of `textBytes` to streams of their own of one
 * run, on and on, each refused write tried again after runplane/client's back-off (the server
 * asks for it: retryable), so that the tenant keeps what the server holds for it full. Lasts
 * until every writer was refused once and the other tenant was served `served` times more.
 */
export async function outputBacklog(
  during: readonly number[],
  {
    gql,
    key,
    runId,
    writers,
    textBytes,
    served,
  }: { gql: Gql; key: string; runId: string; writers: number; textBytes: number; served: number },
) {
  const text = 'x'.repeat(textBytes);
  const refusals: GraphQLErrorShape[] = [];
  const refusedWriters = new Set<number>();
  // Stops the writers, in their back-off too.
  const stop = new AbortController();
  const hog = Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      let offset = 0;
      let retries = 0;
      while (!stop.signal.aborted) {
        // A failed request (the server gone) counts as refused: the caller's checks say why.
        const answer = await gql(APPEND_OUTPUT, { input: { runId, stream: `s${w}`, offset, text } }, key).catch(
          (err: Error): GraphQLAnswer => ({ errors: [{ message: `failed: ${err.message}` }] }),
        );
        if (answer.data?.appendOutput?.__typename === 'OutputChunk') {
          offset += textBytes;
          retries = 0;
        } else {
          refusals.push(...(answer.errors ?? [{ message: JSON.stringify(answer) }]));
          refusedWriters.add(w);
          await sleep(delayFor(defaultRetry, retries++), stop.signal).catch(() => undefined);
        }
      }
    }),
  );
  let full = 0;
  try {
    // Every writer refused once: what the server holds for the tenant (or in all) is full.
    await until(() => refusedWriters.size === writers, 'every writer to be refused', { timeoutMs: 60_000 });
    full = during.length;
    await servedMore(during, served);
  } finally {
    stop.abort();
    await hog;
  }
  /** `full`: the samples of `during` taken before the backlog was full (while the writers' first texts arrived). */
  return { refusals, full };
}
