/** The fan-out rows: many subscribers on one run, the same spread over 100 runs, and idle subscribers by the ten thousand. */

import { type ServerProcess, startServerProcess } from '../harness/processes.ts';
import { ms, ratio } from '../harness/stats.ts';
import { fanOut } from './fan-out.ts';
import { idleSubscribers } from './idle-subscribers.ts';
import { storedWsFloor, wsFloor } from './ws-floor.ts';

type Row = [benchmark: string, result: string, baseline: string, ratio: string];

/** Memory per idle subscriber at most this (bench/targets.ts has every target). */
const KIB_PER_SUBSCRIBER_TARGET = 32;

async function withServer<T>(run: (server: ServerProcess) => Promise<T>) {
  const server = await startServerProcess();
  try {
    return await run(server);
  } finally {
    await server.stop();
  }
}

const delivered = (fan: Awaited<ReturnType<typeof fanOut>>) =>
  `${fan.delivered}/${fan.expected} delivered${fan.incomplete ? `, ${fan.incomplete} subscribers incomplete` : ''}`;

export async function fanOutSection(step: (what: string) => void) {
  const rows: Row[] = [];
  step('fan-out: 1,000 WebSocket subscribers, 50 events/s, on one run and over 100 runs');
  // The floors first: the load generator slows with each run of a thousand subscribers (the bare
  // broadcast's p99 read 25 ms first, then 38 and 44 ms after Runplane's runs), so what runs
  // later is measured the worse for it, and the floors must not be.
  const floor = await wsFloor(1000, 50, 10);
  // The same broadcast behind the engine and the SDK: what is left above it is Runplane's own.
  const stored = await storedWsFloor(1000, 50, 10);
  const fan = await withServer((server) => fanOut(server, 1000, 50, 10));
  const spread = await withServer((server) => fanOut(server, 1000, 50, 10, 100));
  // The bare broadcast writes nothing to a table: the same appends with one subscriber show what they cost alone.
  const lone = await withServer((server) => fanOut(server, 1, 50, 10));
  step('fan-out: 10,000 idle WebSocket subscribers over 100 runs');
  const idle = await withServer((server) => idleSubscribers(server, 10_000, 100));
  const kibPerSubscriber = ((idle.rssMiB - idle.rssIdleMiB) * 1024) / idle.subscribers;
  const heapKibPerSubscriber = ((idle.heapMiB - idle.heapIdleMiB) * 1024) / idle.subscribers;
  rows.push(
    [
      'fan-out, 1,000 subscribers x 50 events/s, one run: delivery p50 / p99',
      `${ms(fan.p50)} / ${ms(fan.p99)}; ${delivered(fan)}`,
      `bare ws broadcast: ${ms(floor.p50)} / ${ms(floor.p99)}`,
      `${ratio(fan.p99 / floor.p99)} (p99; target at most 2x)`,
    ],
    [
      'the bare broadcast behind a store: each event posted, put by the SDK into the engine, then broadcast (p50 / p99)',
      `${ms(stored.p50)} / ${ms(stored.p99)}; ${stored.serverCores.toFixed(2)} cores`,
      `Runplane, one run, above: ${ms(fan.p50)} / ${ms(fan.p99)}; ${fan.serverCores.toFixed(2)} cores`,
      `${ratio(fan.p99 / stored.p99)} (Runplane's p99 to this one's)`,
    ],
    [
      'fan-out, 1,000 subscribers over 100 runs x 50 events/s: delivery p50 / p99',
      `${ms(spread.p50)} / ${ms(spread.p99)}; ${delivered(spread)}`,
      `one run, above: ${ms(fan.p50)} / ${ms(fan.p99)}`,
      ratio(spread.p99 / fan.p99),
    ],
    [
      'fan-out: server CPU while events flow (one run / 100 runs)',
      `${fan.serverCores.toFixed(2)} / ${spread.serverCores.toFixed(2)} cores`,
      `bare ws broadcast: ${floor.serverCores.toFixed(2)} cores (target at most 1.1x)`,
      `${ratio(fan.serverCores / floor.serverCores)} / ${ratio(spread.serverCores / floor.serverCores)}`,
    ],
    [
      "fan-out's own CPU: 1,000 subscribers less one, the same 50 appends/s",
      `${(fan.serverCores - lone.serverCores).toFixed(2)} cores (one subscriber: ${lone.serverCores.toFixed(2)})`,
      `bare ws broadcast: ${floor.serverCores.toFixed(2)} cores`,
      ratio((fan.serverCores - lone.serverCores) / floor.serverCores),
    ],
    [
      'fan-out: server RSS',
      `${fan.rssPeakMiB.toFixed(0)} MiB with 1,000 subscribers`,
      `idle: ${fan.rssIdleMiB.toFixed(0)} MiB`,
      `+${((fan.rssPeakMiB - fan.rssIdleMiB) / 1000).toFixed(3)} MiB/subscriber`,
    ],
    [
      '10,000 idle subscribers over 100 runs: memory per subscriber (RSS; heap)',
      `${kibPerSubscriber.toFixed(1)} KiB; ${heapKibPerSubscriber.toFixed(1)} KiB`,
      `target ${KIB_PER_SUBSCRIBER_TARGET} KiB (server idle: ${idle.rssIdleMiB.toFixed(0)} MiB, with them: ${idle.rssMiB.toFixed(0)} MiB)`,
      `${ratio(kibPerSubscriber / KIB_PER_SUBSCRIBER_TARGET)} of target`,
    ],
    [
      '10,000 idle subscribers: time to connect and subscribe all',
      `${idle.connectSeconds.toFixed(1)} s`,
      `bare ws connects to a bare ws server: ${idle.bareConnectSeconds.toFixed(1)} s`,
      `${ratio(idle.connectSeconds / idle.bareConnectSeconds)} (target at most 3x)`,
    ],
  );
  return { rows, results: { oneRun: fan, hundredRuns: spread, oneSubscriber: lone, bareWs: floor, storedWs: stored, idle } };
}
