/**
 * `npm run demo`: the state-store lab, for real, through the GraphQL HTTP API only.
 *
 *   npm run demo                      # a server on 127.0.0.1:$PORT (4000) if one answers, else its own
 *   npm run demo -- --url URL         # that server
 *   npm run demo -- --own             # always its own, in memory
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { startServer } from '../server.ts';

type Json = Record<string, unknown>;

function client(url: string) {
  return async function gql<T = Json>(query: string, variables: Json = {}): Promise<T> {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: T; errors?: { message: string }[] };
    if (body.errors?.length) throw new Error(`GraphQL error: ${body.errors.map((e) => e.message).join('; ')}`);
    return body.data as T;
  };
}

async function answers(url: string) {
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
      signal: AbortSignal.timeout(1000),
    });
    return response.ok;
  } catch {
    return false;
  }
}

const APPEND = `mutation Append($input: AppendEventInput!) {
  appendEvent(input: $input) {
    __typename
    ... on Event { seq }
    ... on SequenceConflict { lastSeq message }
  }
}`;

const ACQUIRE = `mutation Acquire($input: AcquireLeaseInput!) {
  acquireLease(input: $input) {
    __typename
    ... on Lease { owner token expiresAt }
    ... on LeaseHeld { holder expiresAt }
  }
}`;

export async function runDemo(url: string, print: (line: string) => void = console.log) {
  const gql = client(url);
  const suffix = randomBytes(3).toString('hex');
  const runId = `demo-${suffix}`;
  const unitId = `demo-unit-${suffix}`;

  // 1. One run, its budget and events, read back with ONE query.
  await gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
    input: { id: runId, task: 'audit checkout', budgetCap: 500000 },
  });
  for (const type of ['run.created', 'model.responded', 'tool.returned', 'run.completed']) {
    await gql(APPEND, { input: { runId, type } });
  }
  const { run } = await gql<{
    run: { task: string; status: string; budget: Json; events: { edges: { node: { seq: number; type: string } }[] } };
  }>(`query($id: ID!) { run(id: $id, consistent: true) { task status budget { cap spent } events { edges { node { seq type } } } } }`, {
    id: runId,
  });
  const row = (sk: string, detail: Json) => print(`  run#${runId}  ${sk.padEnd(9)} ${JSON.stringify(detail)}`);
  print("--- one table, one query: the run's whole story ---");
  row('budget', run.budget);
  row('meta', { task: run.task, status: run.status });
  for (const { node } of run.events.edges) row(`evt#${node.seq}`, { type: node.type });

  // 2. Two workers race for seq 5: a conditional put lets exactly one win.
  print('');
  print('--- conditional append: two workers race for seq 5 ---');
  const race = await Promise.all(
    ['A', 'B'].map(async (worker) => ({
      worker,
      result: (
        await gql<{ appendEvent: { __typename: string; lastSeq?: number } }>(APPEND, { input: { runId, type: 'tool.called', seq: 5 } })
      ).appendEvent,
    })),
  );
  race.sort((a, b) => (a.result.__typename === 'Event' ? -1 : 1) - (b.result.__typename === 'Event' ? -1 : 1));
  for (const { worker, result } of race) {
    if (result.__typename === 'Event') {
      print(`  worker ${worker}: append seq 5 -> ok`);
      continue;
    }
    const next = (result.lastSeq ?? 0) + 1;
    print(`  worker ${worker}: append seq 5 -> ${result.__typename} (last seq is ${result.lastSeq}; retries at seq ${next})`);
    const retry = (await gql<{ appendEvent: { __typename: string } }>(APPEND, { input: { runId, type: 'tool.called', seq: next } }))
      .appendEvent;
    print(`  worker ${worker}: append seq ${next} -> ${retry.__typename === 'Event' ? 'ok' : retry.__typename}`);
  }

  // 3. A lease: acquired, refused while live, reclaimed once it expires (real time, 1 s TTL).
  print('');
  print('--- leases: acquire, refuse, reclaim after a crash ---');
  const start = Date.now();
  const t = (at: number | string = Date.now()) => `t=${((new Date(at).getTime() - start) / 1000).toFixed(1)}s`;
  type Acquired = { acquireLease: { __typename: string; owner?: string; holder?: string; token?: number; expiresAt: string } };
  const acquire = async (owner: string) => (await gql<Acquired>(ACQUIRE, { input: { unitId, owner, ttlSeconds: 1 } })).acquireLease;
  const a = await acquire('A');
  print(`  ${t()} worker A acquires unit#${unitId} : ${a.__typename === 'Lease'} (token ${a.token}, until ${t(a.expiresAt)})`);
  const b = await acquire('B');
  print(`  ${t()} worker B tries unit#${unitId}    : ${b.__typename === 'Lease'} (${b.__typename}: A's lease is live; B is refused)`);
  print('  ... worker A crashes; its lease keeps ticking toward expiry');
  const deadline = Date.now() + 10_000;
  while ((await gql<{ lease: unknown }>('query($u: ID!) { lease(unitId: $u) { owner } }', { u: unitId })).lease !== null) {
    if (Date.now() > deadline) throw new Error("A's lease did not expire");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const reclaimed = await acquire('B');
  print(
    `  ${t()} worker B reclaims unit#${unitId} : ${reclaimed.__typename === 'Lease'} (lease expired at ${t(a.expiresAt)}; B wins, token ${reclaimed.token})`,
  );
  print(`  unit#${unitId} lease now held by ${reclaimed.owner} until ${t(reclaimed.expiresAt)}`);
}

async function main() {
  const { values } = parseArgs({ options: { url: { type: 'string' }, own: { type: 'boolean' } } });
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const local = `http://127.0.0.1:${process.env.PORT ?? 4000}/graphql`;
  let url = values.url;
  let stop = async () => {};
  if (!url && !values.own && (await answers(local))) url = local;
  if (!url) {
    const server = await startServer(loadConfig({ PORT: '0', RUNPLANE_IN_MEMORY: 'true', RUNPLANE_GRAPHIQL: 'false' }));
    url = server.url;
    stop = server.stop;
    console.log(`(started a server of its own on ${url}, in memory)\n`);
  } else {
    console.log(`(using the server on ${url})\n`);
  }
  try {
    await runDemo(url);
  } finally {
    await stop();
  }
}

if (process.argv[1]?.endsWith('demo.ts')) {
  main().catch((err) => {
    console.error(`demo: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
