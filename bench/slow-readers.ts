/**
 * Slow readers: many WebSocket subscribers on one run while events of 16 KB are appended
 * at a steady pace, some of which stop reading their socket. Measured twice in the same
 * run, with and without the stalled ones: the server's peak memory, and delivery latency
 * to the subscribers that do read. A stalled reader must cost the others little and the
 * server a bounded amount.
 */
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';
import { until } from './fan-out.ts';

export interface SlowReadersResult {
  subscribers: number;
  stalled: number;
  eventsPerSecond: number;
  payloadBytes: number;
  events: number;
  /** Deliveries to the subscribers that read, of readers x events. */
  delivered: number;
  expected: number;
  p50: number;
  p99: number;
  rssIdleMiB: number;
  rssPeakMiB: number;
  /** Whether every stalled subscriber, reading again, got every event in order (and if not, how not). */
  stalledCaughtUp: true | string;
}

const SUBSCRIPTION = 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq payload } }';
const SEQ = Buffer.from('"seq":');
const SENT_AT = Buffer.from('"sentAt":');

/** A number after `marker` in a frame, read from its bytes (parsing 16 KB frames by the thousand would load the generator, not the server). */
function numberAfter(frame: Buffer, marker: Buffer) {
  const at = frame.indexOf(marker);
  if (at < 0) return undefined;
  let end = at + marker.length;
  while (end < frame.length && ((frame[end] as number) === 46 || ((frame[end] as number) >= 48 && (frame[end] as number) <= 57))) end++;
  return Number(frame.subarray(at + marker.length, end).toString());
}

interface Reader {
  index: number;
  socket: WebSocket;
  lastSeq: number;
  inOrder: boolean;
}

function connect(url: string, runId: string, index: number, onEvent: (reader: Reader, seq: number, sentAt: number | undefined) => void) {
  return new Promise<Reader>((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    const reader: Reader = { index, socket, lastSeq: 0, inOrder: true };
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    socket.on('error', reject);
    socket.on('message', (raw: Buffer) => {
      if (raw.length < 200 && raw.includes('connection_ack')) {
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { runId } } }));
        resolve(reader);
        return;
      }
      const seq = numberAfter(raw, SEQ);
      if (seq === undefined) return;
      if (seq !== reader.lastSeq + 1) reader.inOrder = false;
      reader.lastSeq = seq;
      onEvent(reader, seq, numberAfter(raw, SENT_AT));
    });
  });
}

export async function slowReaders(
  server: ServerProcess,
  {
    subscribers,
    stalled,
    eventsPerSecond,
    payloadBytes,
    seconds,
  }: { subscribers: number; stalled: number; eventsPerSecond: number; payloadBytes: number; seconds: number },
): Promise<SlowReadersResult> {
  const gql = graphqlClient(server.url);
  const runId = `slow-${randomBytes(4).toString('hex')}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'slow readers', budgetCap: 1 },
  });
  const blob = 'x'.repeat(payloadBytes);
  const append = (payload: unknown) =>
    gql('mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }', { input: { runId, type: 'step', payload } });
  const rssIdleMiB = server.rssMiB();
  const latencies: number[] = [];
  const readers: Reader[] = [];
  for (let first = 0; first < subscribers; first += 100) {
    const wave = Array.from({ length: Math.min(100, subscribers - first) }, (_, j) =>
      connect(server.url, runId, first + j, (reader, _seq, sentAt) => {
        if (sentAt !== undefined && reader.index >= stalled) latencies.push(performance.now() - sentAt);
      }),
    );
    readers.push(...(await Promise.all(wave)));
  }
  await append({ warm: true });
  await until(() => readers.every((r) => r.lastSeq >= 1), 60_000, 'every subscriber to get the first event');
  // The first `stalled` stop reading: their sockets' buffers fill, then the server's budget for them.
  for (const reader of readers.slice(0, stalled)) reader.socket.pause();

  const events = eventsPerSecond * seconds;
  let rssPeakMiB = server.rssMiB();
  const sampler = setInterval(() => {
    rssPeakMiB = Math.max(rssPeakMiB, server.rssMiB());
  }, 250);
  const started = performance.now();
  const sends: Promise<unknown>[] = [];
  for (let n = 0; n < events; n++) {
    const due = started + (n * 1000) / eventsPerSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    sends.push(append({ sentAt: performance.now(), blob }));
  }
  await Promise.all(sends);
  const last = events + 1;
  const reading = readers.slice(stalled);
  await until(() => reading.every((r) => r.lastSeq >= last), 60_000, 'every reader to get the last event').catch(() => undefined);
  clearInterval(sampler);
  rssPeakMiB = Math.max(rssPeakMiB, server.rssMiB());
  // The stalled ones read again: each must get everything, in order, from where it stopped.
  for (const reader of readers.slice(0, stalled)) reader.socket.resume();
  const stalledCaughtUp = await until(
    () => readers.slice(0, stalled).every((r) => r.lastSeq >= last),
    120_000,
    'the stalled readers to catch up',
  )
    .then(() => readers.slice(0, stalled).every((r) => r.inOrder) || ('out of order' as const))
    .catch(() => {
      const behind = readers.slice(0, stalled).filter((r) => r.lastSeq < last);
      return `timed out: ${behind.length} behind, the furthest at seq ${Math.min(...behind.map((r) => r.lastSeq))} of ${last}`;
    });
  for (const reader of readers) reader.socket.close();
  return {
    subscribers,
    stalled,
    eventsPerSecond,
    payloadBytes,
    events,
    delivered: latencies.length,
    expected: reading.length * events,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    rssIdleMiB,
    rssPeakMiB,
    stalledCaughtUp,
  };
}
