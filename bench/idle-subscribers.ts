/**
 * Idle subscribers: thousands of WebSocket connections, each with one subscription to a run's
 * events, and no events flowing. What each costs the server in memory, and how long
 * connecting them takes against connecting bare sockets to a bare `ws` server.
 */
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import { graphqlClient } from '../harness/clients.ts';
import { type ServerProcess, startProcess } from '../harness/processes.ts';
import { type Subscriber, subscribe } from './ws.ts';

export interface IdleResult {
  subscribers: number;
  runs: number;
  rssIdleMiB: number;
  rssMiB: number;
  heapIdleMiB: number;
  heapMiB: number;
  connectSeconds: number;
  /** Handshakes that failed and were tried again. */
  retried: number;
  bareConnectSeconds: number;
}

const SUBSCRIPTION = 'subscription($runId: ID!) { runEvents(runId: $runId) { seq type payload } }';
/** Handshakes in flight at once: enough to keep the server busy, not so many that the accept queue overflows. */
const WAVE = 200;

/** Settled memory: a few readings a second apart, the lowest (garbage from connecting is collected meanwhile). */
async function settled(read: () => Promise<number> | number) {
  let lowest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    lowest = Math.min(lowest, await read());
  }
  return lowest;
}

async function inWaves<T>(count: number, open: (i: number) => Promise<T>) {
  const opened: T[] = [];
  for (let first = 0; first < count; first += WAVE) {
    opened.push(...(await Promise.all(Array.from({ length: Math.min(WAVE, count - first) }, (_, j) => open(first + j)))));
  }
  return opened;
}

/** Bare sockets to a bare ws server in a process of its own (as the server under test is): the floor of connecting, for the ratio. */
async function bareConnect(count: number) {
  const server = await startProcess('bench/ws-floor.ts', {}, [/bare ws on (\d+)/], ['serve']);
  const port = /bare ws on (\d+)/.exec(server.output())?.[1];
  const started = performance.now();
  const sockets = await inWaves(
    count,
    () =>
      new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(`ws://127.0.0.1:${port}`);
        socket.once('open', () => resolve(socket));
        socket.on('error', reject);
      }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const socket of sockets) socket.terminate();
  await server.stop();
  return seconds;
}

export async function idleSubscribers(server: ServerProcess, subscribers: number, runs: number): Promise<IdleResult> {
  const gql = graphqlClient(server.url);
  const prefix = `idle-${randomBytes(4).toString('hex')}`;
  for (let r = 0; r < runs; r++) {
    await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
      input: { id: `${prefix}-${r}`, task: 'idle', budgetCap: 1 },
    });
  }
  const heap = () => server.metric('runplane_process_heap_used_bytes').then((bytes) => bytes / 2 ** 20);
  const rssIdleMiB = await settled(() => server.rssMiB());
  const heapIdleMiB = await settled(heap);
  const errors: unknown[] = [];
  const started = performance.now();
  let retried = 0;
  // A handshake refused under the connect storm is tried again (and counted), as a real client would.
  const connect = async (i: number): Promise<Subscriber> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await subscribe(
          server.url,
          SUBSCRIPTION,
          { runId: `${prefix}-${i % runs}` },
          () => undefined,
          (err) => errors.push(err),
        );
      } catch (err) {
        if (attempt === 5) throw err;
        retried++;
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  };
  const sockets: Subscriber[] = await inWaves(subscribers, connect);
  // Subscribed means the server counts them: the last subscribe messages may still be on their way.
  const open = async () => server.metric('runplane_subscriptions_open');
  const deadline = performance.now() + 120_000;
  while ((await open()) < subscribers && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  const connectSeconds = (performance.now() - started) / 1000;
  const rssMiB = await settled(() => server.rssMiB());
  const heapMiB = await settled(heap);
  for (const socket of sockets) socket.close();
  if (errors.length > retried) console.error(`idle subscribers: ${errors.length} errors, first: ${String(errors[0])}`);
  const bareConnectSeconds = await bareConnect(subscribers);
  return { subscribers, runs, rssIdleMiB, rssMiB, heapIdleMiB, heapMiB, connectSeconds, retried, bareConnectSeconds };
}
