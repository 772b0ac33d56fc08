/**
 * `npm run demo`: the state-store lab (a run's story, a race for a seq, leases, run claims, live
 * output), for real, through the GraphQL HTTP API only, with Runplane's own client (runplane/client).
 *
 *   npm run demo                      # a server on 127.0.0.1:$PORT (4000) if one answers, else its own
 *   npm run demo -- --url URL         # that server
 *   npm run demo -- --own             # always its own, in memory
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createRunplane, operations, type Runplane } from '@runplane/client';
import { loadConfig } from '../config.ts';
import { isMain } from '../lib/is-main.ts';
import { startServer } from '../server.ts';

type Json = Record<string, unknown>;

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

export async function runDemo(url: string, print: (line: string) => void = console.log) {
  // Requests only (no streams): the client's own retries and idempotency keys, nothing else.
  const client = createRunplane({ url, transport: 'sse' });
  const suffix = randomBytes(3).toString('hex');
  const runId = `demo-${suffix}`;
  const unitId = `demo-unit-${suffix}`;

  // 1. One run, its budget and events, read back with ONE query.
  await client.createRun({ id: runId, task: 'audit checkout', budgetCap: 500000 });
  for (const type of ['run.created', 'model.responded', 'tool.returned', 'run.completed']) {
    await client.appendEvent({ runId, type });
  }
  const run = await client.run(runId, { consistent: true });
  if (!run) throw new Error(`run ${runId} is missing right after it was created`);
  const row = (sk: string, detail: Json) => print(`  run#${runId}  ${sk.padEnd(9)} ${JSON.stringify(detail)}`);
  print("--- one table, one query: the run's whole story ---");
  row('budget', { cap: run.budget.cap, spent: run.budget.spent });
  row('meta', { task: run.task, status: run.status });
  for (const { node } of run.events.edges) row(`evt#${node.seq}`, { type: node.type });

  // 2. Two workers race for seq 5: a conditional put lets exactly one win.
  print('');
  print('--- conditional append: two workers race for seq 5 ---');
  const race = await Promise.all(
    ['A', 'B'].map(async (worker) => ({ worker, result: await client.appendEvent({ runId, type: 'tool.called', seq: 5 }) })),
  );
  race.sort((a, b) => (a.result.__typename === 'Event' ? -1 : 1) - (b.result.__typename === 'Event' ? -1 : 1));
  for (const { worker, result } of race) {
    if (result.__typename === 'Event') {
      print(`  worker ${worker}: append seq 5 -> ok`);
      continue;
    }
    if (result.__typename !== 'SequenceConflict') throw new Error(`worker ${worker}: ${result.__typename}: ${result.message}`);
    const next = result.lastSeq + 1;
    print(`  worker ${worker}: append seq 5 -> ${result.__typename} (last seq is ${result.lastSeq}; retries at seq ${next})`);
    const retry = await client.appendEvent({ runId, type: 'tool.called', seq: next });
    print(`  worker ${worker}: append seq ${next} -> ${retry.__typename === 'Event' ? 'ok' : retry.__typename}`);
  }

  // 3. A lease: acquired, refused while live, reclaimed once it expires (real time, 1 s TTL).
  print('');
  print('--- leases: acquire, refuse, reclaim after a crash ---');
  const start = Date.now();
  const t = (at: number | string = Date.now()) => `t=${((new Date(at).getTime() - start) / 1000).toFixed(1)}s`;
  const acquire = async (owner: string) => {
    const answer = await client.acquireLease({ unitId, owner, ttlSeconds: 1 });
    if (answer.__typename === 'IdempotencyConflict') throw new Error(answer.message);
    return answer;
  };
  const a = await acquire('A');
  if (a.__typename !== 'Lease') throw new Error(`worker A was refused a free unit: ${a.message}`);
  print(`  ${t()} worker A acquires unit#${unitId} : true (token ${a.token}, until ${t(a.expiresAt)})`);
  const b = await acquire('B');
  print(`  ${t()} worker B tries unit#${unitId}    : ${b.__typename === 'Lease'} (${b.__typename}: A's lease is live; B is refused)`);
  print('  ... worker A crashes; its lease keeps ticking toward expiry');
  const deadline = Date.now() + 10_000;
  while ((await client.lease(unitId)) !== null) {
    if (Date.now() > deadline) throw new Error("A's lease did not expire");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const reclaimed = await acquire('B');
  if (reclaimed.__typename !== 'Lease') throw new Error(`worker B could not reclaim the unit: ${reclaimed.message}`);
  print(`  ${t()} worker B reclaims unit#${unitId} : true (lease expired at ${t(a.expiresAt)}; B wins, token ${reclaimed.token})`);
  print(`  unit#${unitId} lease now held by ${reclaimed.owner} until ${t(reclaimed.expiresAt)}`);

  // 4. The same for a run: a worker claims it, dies mid-run; the run is found STALLED, another
  // worker takes it over at the next seq, and the dead one's late write is refused.
  print('');
  print('--- run claims: a worker dies mid-run, another takes over ---');
  const claimedRun = `${runId}-claimed`;
  await client.createRun({ id: claimedRun, task: 'summarize the audit', budgetCap: 1000 });
  const first = await client.claimRun({ runId: claimedRun, holder: 'A', ttlSeconds: 1 });
  if (first.__typename !== 'RunClaim') throw new Error(`worker A could not claim run ${claimedRun}: ${first.__typename}`);
  const step = await client.appendEvent({ runId: claimedRun, type: 'model.responded', fencingToken: first.token });
  print(
    `  ${t()} worker A claims run#${claimedRun} (token ${first.token}) and appends seq ${step.__typename === 'Event' ? step.seq : '?'}`,
  );
  print('  ... worker A dies; its claim is not renewed');
  const stallDeadline = Date.now() + 60_000;
  while ((await client.run(claimedRun, { consistent: true, first: 0 }))?.status !== 'STALLED') {
    if (Date.now() > stallDeadline) throw new Error(`run ${claimedRun} was not found stalled`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  print(`  ${t()} the stall watcher finds run#${claimedRun} STALLED (event run.stalled)`);
  const second = await client.claimRun({ runId: claimedRun, holder: 'B', ttlSeconds: 30 });
  if (second.__typename !== 'RunClaim') throw new Error(`worker B could not take run ${claimedRun} over: ${second.__typename}`);
  const next = await client.appendEvent({ runId: claimedRun, type: 'model.responded', fencingToken: second.token });
  print(
    `  ${t()} worker B claims it (token ${second.token}): RUNNING again (event run.reclaimed), appends seq ${next.__typename === 'Event' ? next.seq : '?'}`,
  );
  const late = await client.appendEvent({ runId: claimedRun, type: 'tool.returned', fencingToken: first.token });
  print(`  ${t()} worker A wakes up and appends with token ${first.token} -> ${late.__typename} (nothing written: the run is B's)`);
  await client.releaseRunClaim({ runId: claimedRun, holder: 'B', token: second.token });

  // 5. Live output: a model's answer token by token into one stream, events marking the steps.
  print('');
  print("--- live output: a model's answer, token by token, beside the events ---");
  await streamAnswer(client, `${runId}-answer`, print);
  await client.close();
}

/** The fake model's answer, as the tokens it writes (one a few milliseconds apart). */
export const ANSWER_TOKENS = (
  'The audit of checkout found three issues. First, the coupon step retries a charge without an ' +
  'idempotency key, so a timeout can charge twice. Second, the cart total is rounded before tax. ' +
  'Third, a failed address check leaves the order open. Fixes are in the plan below. ✅'
).match(/\S+\s*/g) as string[];

/** Writes ANSWER_TOKENS into the run's output stream "llm" as a worker holding the run, fenced by its claim. */
export async function streamAnswer(client: Runplane, runId: string, print: (line: string) => void, tokenDelayMs = 25) {
  await client.createRun({ id: runId, task: 'explain the audit', budgetCap: 1000 });
  const claim = await client.claimRun({ runId, holder: 'M', ttlSeconds: 30 });
  if (claim.__typename !== 'RunClaim') throw new Error(`worker M could not claim run ${runId}: ${claim.__typename}`);
  const fencingToken = claim.token;
  const event = async (type: string, payload?: Json) => {
    const answer = await client.appendEvent({ runId, type, payload, fencingToken });
    if (answer.__typename !== 'Event') throw new Error(`event ${type} on run ${runId}: ${answer.__typename}`);
    return answer.seq;
  };
  print(`  worker M claims run#${runId} (token ${fencingToken}); event model.requested (seq ${await event('model.requested')})`);
  // A reader following the stream live, as the console does, from before the first token.
  let followed = '';
  const reader = (async () => {
    for await (const text of client.runOutput(runId, 'llm')) followed += text;
  })();
  const writer = client.output(runId, 'llm', { fencingToken, intervalMs: 20 });
  for (const token of ANSWER_TOKENS) {
    writer.write(token);
    await new Promise((resolve) => setTimeout(resolve, tokenDelayMs));
  }
  await writer.close();
  const written = ANSWER_TOKENS.join('');
  print(`  worker M streams ${ANSWER_TOKENS.length} tokens into output "llm" (fenced by token ${fencingToken}), then closes it`);
  print(`  event model.responded (seq ${await event('model.responded', { tokens: ANSWER_TOKENS.length, stream: 'llm' })})`);
  await reader;
  const { run } = await client.request(operations.OutputLengths, { id: runId });
  const llm = run?.outputs.find((o) => o.stream === 'llm');
  print(`  Run.outputs: llm, ${llm?.length} characters, ${llm?.final ? 'final' : 'not final'}`);
  print(
    `  a reader following it live got ${followed === written ? 'exactly the text written' : 'OTHER TEXT'}: ${JSON.stringify(followed)}`,
  );
  await client.releaseRunClaim({ runId, holder: 'M', token: fencingToken });
  return { written, followed };
}

/** `runplane demo [--url URL] [--own]`. */
export async function main(args = process.argv.slice(2)) {
  const { values } = parseArgs({ args, options: { url: { type: 'string' }, own: { type: 'boolean' } } });
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const local = `http://127.0.0.1:${process.env.PORT ?? 4000}/graphql`;
  let url = values.url;
  let stop = async () => {};
  if (!url && !values.own && (await answers(local))) url = local;
  if (!url) {
    // The stall watcher looks every second (default 5): the dead worker's run is found quickly.
    const server = await startServer(
      loadConfig({ PORT: '0', RUNPLANE_IN_MEMORY: 'true', RUNPLANE_GRAPHIQL: 'false', RUNPLANE_STALL_CHECK_SECONDS: '1' }),
    );
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

if (isMain(import.meta.url)) {
  main().catch((err) => {
    console.error(`demo: ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
