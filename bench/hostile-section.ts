/**
 * `npm run bench -- hostile`: each attack on the shared pools (bench/hostile/attacks.ts, the ones the
 * hostile tests make at a smaller scale) against a server process of its own, at the scale the
 * tests had before they were cut for CI, with another tenant's small request timed before,
 * during and after it: its p99 under the attack against its own unloaded p99 in the same run,
 * and the 500 ms target (bench/targets.ts); the server's resident set growth over the attack.
 */
import { documentClient } from '../harness/clients.ts';
import { type ServerProcess, startServerProcess } from '../harness/processes.ts';
import { ms, ratio } from '../harness/stats.ts';
import { APPEND_OUTPUT, listClaims, outputBacklog, readOutputs, unreadFeeds } from './hostile/attacks.ts';
import { type AttackFigures, type GraphQLAnswer, graphql, outcomeOf, p99, summary, underAttack } from './hostile/measure.ts';
import { claimedRunRows, putRows, runRows, runWithEventsRows, runWithStreamsRows } from './hostile/rows.ts';

type Row = [benchmark: string, result: string, baseline: string, ratio: string];

/** The other tenant's p99 under any attack at most this (ms). */
export const HOSTILE_P99_TARGET_MS = 500;
const ATTACKER = 'hostile-attacker-key-0123456789';
const OTHER = 'hostile-other-key-0123456789';
const TABLE = 'hostile';
/** The other tenant's requests, this far apart during an attack (a tenant going about its work, not a second load). */
const PACE_MS = 20;

/** One attack's figures as the results JSON keeps them (`note`: what its row adds). */
export type HostileFigures = ReturnType<typeof summary> & { alive: boolean; outcomes: Record<string, number>; note?: string };

interface Setup {
  server: ServerProcess;
  gql: ReturnType<typeof graphql>;
  rows: (items: Parameters<typeof putRows>[2]) => Promise<void>;
}

/** A server of its own (the attacker's tenant `acme`, the other `globex`), set up, attacked, measured, stopped. */
async function attacked<T>(
  env: Record<string, string>,
  setUp: (s: Setup) => Promise<void>,
  attack: (s: Setup) => Parameters<typeof underAttack<T>>[0],
) {
  // Quiet: the attacks make the server log (the hog's throttled writes, each tried again).
  const server = await startServerProcess(
    { RUNPLANE_TABLE: TABLE, RUNPLANE_API_KEYS: `${ATTACKER}=acme,${OTHER}=globex`, ...env },
    { quiet: true },
  );
  try {
    const s: Setup = { server, gql: graphql(server.url), rows: (items) => putRows(documentClient(server.engineEndpoint), TABLE, items) };
    await s.rows(Array.from({ length: 5 }, (_, i) => runRows('globex', `other-${i}`)).flat());
    await setUp(s);
    const figures = await underAttack({ paceMs: PACE_MS, ...attack(s) });
    return { figures, alive: server.ended() === undefined };
  } finally {
    await server.stop();
  }
}

const rssOf = (server: ServerProcess) => () => Promise.resolve(server.rssMiB() * 2 ** 20);
const otherTenantsRuns = (gql: Setup['gql']) => () => gql('{ runs(first: 10) { edges { node { id status } } } }', {}, OTHER);
/** `BENCH_HOSTILE=backlog,claims` runs only those attacks (claims, outputs, unread, backlog); unset, all of them. */
const only = process.env.BENCH_HOSTILE?.split(',').filter(Boolean);
const wanted = (attack: 'claims' | 'outputs' | 'unread' | 'backlog') => !only?.length || only.includes(attack);

const counted = (outcomes: string[]) => {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
};

export async function hostileSection(step: (what: string) => void) {
  const measured: Record<string, HostileFigures> = {};
  const note = (
    name: string,
    { figures, alive }: { figures: AttackFigures<unknown>; alive: boolean },
    outcomes: string[],
    extra?: string,
  ) => {
    measured[name] = { ...summary(figures), alive, outcomes: counted(outcomes), ...(extra ? { note: extra } : {}) };
  };

  if (wanted('claims')) {
    step('hostile, finding 5: 500 claimed runs listed with claims and budgets, 15 aliases, 4 clients x 2 requests');
    const claims = await attacked(
      {},
      async ({ rows }) => {
        const untilMs = Date.now() + 3_600_000;
        await rows(Array.from({ length: 500 }, (_, i) => claimedRunRows('acme', `claimed-${i}`, { untilMs })).flat());
      },
      ({ server, gql }) => ({
        request: otherTenantsRuns(gql),
        rss: rssOf(server),
        attack: () => listClaims(gql, ATTACKER, { runs: 500, aliases: 15, clients: 4, requests: 2 }),
      }),
    );
    note('claims listing (finding 5)', claims, claims.figures.outcome.outcomes);
  }

  if (wanted('outputs')) {
    step('hostile, finding 1: runs of 64 output streams read with 15 aliases, 4 clients x 3 requests');
    const outputs = await attacked(
      {},
      async ({ rows }) => {
        await rows(Array.from({ length: 4 }, (_, r) => runWithStreamsRows('acme', `streams-${r}`, 64)).flat());
      },
      ({ server, gql }) => ({
        request: otherTenantsRuns(gql),
        rss: rssOf(server),
        attack: () => readOutputs(gql, ATTACKER, { runId: 'streams-0', aliases: 15, clients: 4 }),
      }),
    );
    note('outputs query (finding 1)', outputs, outputs.figures.outcome.outcomes);
  }

  if (wanted('unread')) {
    for (const feed of ['runOutput', 'runEvents'] as const) {
      step(`hostile, finding 2: 2 unread sockets x 100 ${feed} subscriptions from the start of 2 MiB`);
      const unread = await attacked(
        // However long the attack, an unread socket stays a stall, not a cut one.
        { RUNPLANE_SUBSCRIBE_RATE: '1000', RUNPLANE_WS_PING_SECONDS: '600' },
        async ({ gql, rows }) => {
          if (feed === 'runEvents') {
            const blob = 'x'.repeat(48 * 1024);
            await rows(
              runWithEventsRows(
                'acme',
                'big',
                Array.from({ length: 40 }, (_, i) => ({ i, blob })),
              ),
            );
            return;
          }
          await rows(runRows('acme', 'big'));
          const piece = 'y'.repeat(256 * 1024);
          for (let offset = 0; offset < 2 * 2 ** 20; offset += piece.length)
            await gql(APPEND_OUTPUT, { input: { runId: 'big', stream: 'out', offset, text: piece, durable: true } }, ATTACKER);
        },
        ({ server, gql }) => ({
          request: otherTenantsRuns(gql),
          rss: rssOf(server),
          attack: async (during: readonly number[]) => {
            await unreadFeeds(during, {
              url: server.url,
              key: ATTACKER,
              sockets: 2,
              subscriptions: 100,
              subscription:
                feed === 'runOutput'
                  ? 'subscription { runOutput(runId: "big", stream: "out", afterOffset: 0) { offset text } }'
                  : 'subscription { runEvents(runId: "big", afterSeq: 0) { seq payload } }',
              open: () => server.metric('runplane_subscriptions_open'),
              // Until the reads their feeds had queued are done: the attack's cost goes on that long.
              idle: async () => (await server.metric('runplane_table_reads_in_flight')) === 0,
            });
            return [];
          },
        }),
      );
      note(`unread ${feed} sockets (finding 2)`, unread, []);
    }
  }

  if (wanted('backlog')) {
    step('hostile, finding 4: 48 writers of 512 KB texts to one run, its partition at 100 write units a second');
    let calmOffset = 0;
    const calm: GraphQLAnswer[] = [];
    const backlog = await attacked(
      { RUNPLANE_ENGINE_PARTITION_LIMITS: 'true', RUNPLANE_ENGINE_PARTITION_WCU: '100', RUNPLANE_OUTPUT_FLUSH_MS: '20' },
      async ({ rows }) => {
        await rows([...runRows('acme', 'hog'), ...runRows('globex', 'calm')]);
      },
      ({ server, gql }) => ({
        // The other tenant's small appendOutput, its log.
        request: async () => {
          const text = `line ${calmOffset}\n`;
          const answer = await gql(APPEND_OUTPUT, { input: { runId: 'calm', stream: 'log', offset: calmOffset, text } }, OTHER);
          if (answer.data?.appendOutput?.__typename === 'OutputChunk') calmOffset += text.length;
          calm.push(answer);
        },
        rss: rssOf(server),
        attack: (during) => outputBacklog(during, { gql, key: ATTACKER, runId: 'hog', writers: 48, textBytes: 512 * 1024, served: 30 }),
      }),
    );
    // Apart: once the backlog is full, and before (while the writers' first 24 MB of texts arrive).
    const { full } = backlog.figures.outcome;
    const whileFull = `${ms(p99(backlog.figures.during.slice(full)))} once full, ${ms(p99(backlog.figures.during.slice(0, full)))} before`;
    note('output backlog (finding 4)', backlog, calm.map(outcomeOf), whileFull);
  }

  const rows: Row[] = Object.entries(measured).map(([name, m]) => [
    `hostile: ${name}: the other tenant's p99 (server RSS growth)`,
    `${ms(m.p99)} (+${m.rssGrowthMiB.toFixed(0)} MiB)${m.note ? `; ${m.note}` : ''}${m.alive ? '' : '; the server DIED'}`,
    `alone, same run: ${ms(m.baselineP99)}`,
    `${ratio(m.ratio)} (target p99 <= ${HOSTILE_P99_TARGET_MS} ms: ${m.p99 <= HOSTILE_P99_TARGET_MS ? 'met' : 'NOT met'})`,
  ]);
  return { rows, result: measured };
}
