/**
 * Fan-out: many WebSocket subscribers on one run while events are appended at a steady
 * pace. Every subscriber must get every event, in order; the figure is how long each
 * delivery took from the moment its append was sent, and what the server's memory grew to.
 */
import { randomBytes } from 'node:crypto';
import { graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';
import { type Subscriber, subscribe } from './ws.ts';

export interface FanOutResult {
  subscribers: number;
  runs: number;
  eventsPerSecond: number;
  events: number;
  /** Deliveries made, of subscribers x events expected. */
  delivered: number;
  expected: number;
  /** Subscribers that missed an event or got one out of order. */
  incomplete: number;
  p50: number;
  p99: number;
  max: number;
  rssIdleMiB: number;
  rssPeakMiB: number;
  connectSeconds: number;
  /** CPU the server used while events flowed, in cores (1 = one core busy). */
  serverCores: number;
}

const SUBSCRIPTION = 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq payload } }';

/**
 * Subscribers are spread over `runs` runs (subscriber i watches run i mod runs) and the events
 * go round the runs in turn, so every run gets its share of the rate.
 */
export async function fanOut(
  server: ServerProcess,
  subscribers: number,
  eventsPerSecond: number,
  seconds: number,
  runs = 1,
): Promise<FanOutResult> {
  const gql = graphqlClient(server.url);
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const runIds = Array.from({ length: runs }, (_, r) => `${prefix}-${r}`);
  for (const id of runIds) {
    await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
      input: { id, task: 'fan-out', budgetCap: 1 },
    });
  }
  const append = (runId: string, payload: unknown) =>
    gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }', {
      input: { runId, type: 'step', payload },
    });
  const rssIdleMiB = server.rssMiB();

  const latencies: number[] = [];
  /** Per subscriber: the last seq it got (an event must follow it directly). */
  const lastSeq = new Array<number>(subscribers).fill(0);
  let broken = 0;
  const errors: unknown[] = [];
  const connecting = performance.now();
  const sockets: Subscriber[] = [];
  // Connect in waves: a thousand handshakes at once would measure the accept queue, not delivery.
  for (let first = 0; first < subscribers; first += 100) {
    const wave = Array.from({ length: Math.min(100, subscribers - first) }, (_, j) => {
      const i = first + j;
      return subscribe(
        server.url,
        SUBSCRIPTION,
        { runId: runIds[i % runs] },
        (data) => {
          const event = data.runEvents as { seq: number; payload: { sentAt?: number } | null };
          if (event.seq !== (lastSeq[i] as number) + 1) broken++;
          lastSeq[i] = event.seq;
          if (event.payload?.sentAt !== undefined) latencies.push(performance.now() - event.payload.sentAt);
        },
        (err) => errors.push(err),
      );
    });
    sockets.push(...(await Promise.all(wave)));
  }
  // Every subscription is live once each has the first event.
  await Promise.all(runIds.map((runId) => append(runId, { warm: true })));
  await until(() => lastSeq.every((seq) => seq >= 1), 60_000, 'every subscriber to get the first event');
  const connectSeconds = (performance.now() - connecting) / 1000;

  // A second at the pace (over 100 runs, an event each: two), untimed, as the floors get it (ws-floor.ts): the figures are of a warm
  // server, not of its first events (code not yet optimized, buffers not yet grown), which
  // queued up to 150 ms behind one another while every later one took under 40.
  const warmEvents = Math.max(eventsPerSecond, runs);
  await paced(warmEvents, eventsPerSecond, (n) => append(runIds[n % runs] as string, { warm: true }));
  /** The last seq of subscriber i's run after `count` events round the runs (after the first event). */
  const lastAfter = (count: number, i: number) => 1 + Math.floor(count / runs) + (i % runs < count % runs ? 1 : 0);
  await until(() => lastSeq.every((seq, i) => seq >= lastAfter(warmEvents, i)), 60_000, 'every subscriber to get the warm-up events');
  latencies.length = 0;

  const events = eventsPerSecond * seconds;
  let rssPeakMiB = server.rssMiB();
  const sampler = setInterval(() => {
    rssPeakMiB = Math.max(rssPeakMiB, server.rssMiB());
  }, 250);
  const cpuBefore = server.cpuSeconds();
  const started = performance.now();
  await paced(events, eventsPerSecond, (n) => append(runIds[(warmEvents + n) % runs] as string, { sentAt: performance.now() }));
  const last = (i: number) => lastAfter(warmEvents + events, i);
  await until(() => lastSeq.every((seq, i) => seq >= last(i)), 60_000, "every subscriber to get its run's last event").catch(
    () => undefined,
  );
  const serverCores = (server.cpuSeconds() - cpuBefore) / ((performance.now() - started) / 1000);
  clearInterval(sampler);
  rssPeakMiB = Math.max(rssPeakMiB, server.rssMiB());
  for (const socket of sockets) socket.close();
  if (errors.length > 0) console.error(`fan-out: ${errors.length} subscriber errors, first: ${String(errors[0])}`);
  return {
    subscribers,
    runs,
    eventsPerSecond,
    events,
    delivered: latencies.length,
    // Each subscriber expects its run's share of the events (the warm-up not counted: it carries no time).
    expected: lastSeq.reduce((sum, _, i) => sum + last(i) - lastAfter(warmEvents, i), 0),
    incomplete: broken + lastSeq.filter((seq, i) => seq !== last(i)).length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: percentile(latencies, 100),
    rssIdleMiB,
    rssPeakMiB,
    connectSeconds,
    serverCores,
  };
}

/** `count` sends at `perSecond`, kept against the clock (not against the previous send), all awaited. */
export async function paced(count: number, perSecond: number, send: (n: number) => Promise<unknown>) {
  const started = performance.now();
  const sends: Promise<unknown>[] = [];
  for (let n = 0; n < count; n++) {
    const wait = started + (n * 1000) / perSecond - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    sends.push(observed(send(n)));
  }
  await Promise.all(sends);
}

/**
 * `promise`, its failure observed now: one awaited only later (with the rest of the sends)
 * must not end the process as an unhandled rejection before the caller's cleanup runs.
 */
export function observed<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

export async function until(condition: () => boolean, timeoutMs: number, what: string) {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
