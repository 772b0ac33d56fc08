/**
 * Catch-up: a subscriber joining with afterSeq 0 on a run of many events, timed until it
 * has the last one (it is live from there). Beside it, reading the same events with the
 * raw SDK: a paginated, strongly consistent Query of the run's partition. Both are timed
 * warm (a server that has been up a while), as the median of alternating rounds.
 */
import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';
import { until } from './fan-out.ts';
import { subscribe } from './ws.ts';

export interface CatchUpResult {
  events: number;
  /** From subscribing until the subscriber had the last event (median of the rounds). */
  liveSeconds: number;
  /** Reading them all with the SDK (median of the rounds). */
  rawQuerySeconds: number;
  /** The next append, once live, reached the subscriber. */
  liveAfter: boolean;
  /** How single requests fare on this long run beside a run of 100 events (p50, ms). */
  growth: { appendLong: number; appendShort: number; readLong: number; readShort: number };
}

/** Measured rounds of each (after one warm-up of each); the medians are reported. */
const ROUNDS = 5;

const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }';

export async function catchUp(server: ServerProcess, events: number): Promise<CatchUpResult> {
  const gql = graphqlClient(server.url);
  const runId = `bench-${randomBytes(4).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'catch-up', budgetCap: 1 },
  });
  // Written through the API by 64 writers at once (group commit makes that quick).
  let written = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (written < events) {
        written++;
        await gql(APPEND, { input: { runId, type: 'step', payload: { text: 'a step of about this size' } } });
      }
    }),
  );

  const dynamo = documentClient(server.engineEndpoint);
  const readAll = async () => {
    const reading = performance.now();
    let read = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await dynamo.send(
        new QueryCommand({
          TableName: 'runplane',
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :evt)',
          ExpressionAttributeValues: { ':pk': `default#run#${runId}`, ':evt': 'evt#' },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      read += page.Items?.length ?? 0;
      start = page.LastEvaluatedKey;
    } while (start);
    if (read !== events) throw new Error(`the run has ${read} events, expected ${events}`);
    return (performance.now() - reading) / 1000;
  };
  /** One subscriber from afterSeq 0 until it has the last event; with `live`, then one more appended. */
  const catchUpOnce = async (live: boolean) => {
    let last = 0;
    let outOfOrder = 0;
    // Timed to the last event's arrival itself (a poll would add up to its interval).
    let caughtUpAt = 0;
    const subscribing = performance.now();
    const subscriber = await subscribe(
      server.url,
      'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq } }',
      { runId },
      (data) => {
        const { seq } = data.runEvents as { seq: number };
        if (seq !== last + 1) outOfOrder++;
        last = seq;
        if (seq === events) caughtUpAt = performance.now();
      },
      (err) => console.error('catch-up subscriber:', err),
    );
    await until(() => last >= events, 120_000, `seq ${events}`);
    const seconds = ((caughtUpAt || performance.now()) - subscribing) / 1000;
    let liveAfter = false;
    if (live) {
      await gql(APPEND, { input: { runId, type: 'live' } });
      liveAfter = await until(() => last === events + 1, 10_000, 'the live event').then(
        () => true,
        () => false,
      );
    }
    subscriber.close();
    if (outOfOrder > 0) throw new Error(`${outOfOrder} events arrived out of order`);
    return { seconds, liveAfter };
  };

  // A warm-up pair, then rounds alternating which goes first: both meet the same moments of this machine.
  await readAll();
  await catchUpOnce(false);
  const raw: number[] = [];
  const live: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) raw.push(await readAll());
    live.push((await catchUpOnce(false)).seconds);
    if (round % 2 === 1) raw.push(await readAll());
  }
  dynamo.destroy();
  const { liveAfter } = await catchUpOnce(true);
  return {
    events,
    liveSeconds: percentile(live, 50),
    rawQuerySeconds: percentile(raw, 50),
    liveAfter,
    growth: await growth(gql, runId),
  };
}

/** appendEvent and run(id) (first 100 events) on the long run and on a run of 100 events, alternately. */
async function growth(gql: ReturnType<typeof graphqlClient>, longRun: string) {
  const shortRun = `bench-${randomBytes(4).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: shortRun, task: 'short', budgetCap: 1 },
  });
  for (let i = 0; i < 100; i++) await gql(APPEND, { input: { runId: shortRun, type: 'step' } });
  const read = 'query($id: ID!) { run(id: $id) { id status events(first: 100) { edges { node { seq type payload } } } } }';
  const times = { appendLong: [] as number[], appendShort: [] as number[], readLong: [] as number[], readShort: [] as number[] };
  const time = async (into: number[], request: () => Promise<unknown>) => {
    const started = performance.now();
    await request();
    into.push(performance.now() - started);
  };
  for (let i = 0; i < 100; i++) {
    await time(times.appendLong, () => gql(APPEND, { input: { runId: longRun, type: 'step' } }));
    await time(times.appendShort, () => gql(APPEND, { input: { runId: shortRun, type: 'step' } }));
    await time(times.readLong, () => gql(read, { id: longRun }));
    await time(times.readShort, () => gql(read, { id: shortRun }));
  }
  return {
    appendLong: percentile(times.appendLong, 50),
    appendShort: percentile(times.appendShort, 50),
    readLong: percentile(times.readLong, 50),
    readShort: percentile(times.readShort, 50),
  };
}
