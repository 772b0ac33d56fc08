/**
 * The third performance round's targets, each computed from the figures of one run (same-run
 * ratios) and written to the results JSON as `targets`. A target whose section did not run is
 * left out. `npm run bench -- requests contention fan-out` runs every section they need;
 * `npm run bench -- hostile` the hostile tenant's (another tenant's p99 under each attack).
 */
import { HOSTILE_P99_TARGET_MS } from './hostile-section.ts';

export interface Target {
  target: string;
  /** The figure as measured (a ratio, or KiB for memory). */
  now: number;
  /** Its bound, and which side of it is good. */
  limit: number;
  atMost: boolean;
  met: boolean;
}

interface Figures {
  singleRequest?: { append: { ratio: number } };
  leases?: { api: { acquisitionsPerSecond: number }; raw: { acquisitionsPerSecond: number } };
  catchUp?: { liveSeconds: number; rawQuerySeconds: number };
  contention?: { groupCommit: { appendsPerSecond: number }; withoutGroupCommit: { appendsPerSecond: number } }[];
  fanOut?: {
    oneRun: { p99: number; serverCores: number };
    /** The same appends with one subscriber: what they cost the server alone. */
    oneSubscriber?: { serverCores: number };
    bareWs: { p99: number; serverCores: number };
    idle: { rssMiB: number; rssIdleMiB: number; subscribers: number; connectSeconds: number; bareConnectSeconds: number };
  };
  /** Per attack of the `hostile` section: the other tenant's p99 under it (ms). */
  hostile?: Record<string, { p99: number }>;
}

const bound = (target: string, now: number, limit: number, atMost = true): Target => ({
  target,
  now,
  limit,
  atMost,
  met: atMost ? now <= limit : now >= limit,
});

/** Each target the run has the figures for. */
export function targetsOf(results: Figures): Target[] {
  const targets: Target[] = [];
  const { singleRequest, leases, catchUp, contention, fanOut, hostile } = results;
  if (singleRequest) targets.push(bound("appendEvent p50 at most 1.05x the SDK's PutItem", singleRequest.append.ratio, 1.05));
  if (catchUp)
    targets.push(bound("catch-up of 10,000 events at most 1.2x the SDK's Query", catchUp.liveSeconds / catchUp.rawQuerySeconds, 1.2));
  if (fanOut) {
    const { oneRun, bareWs, idle } = fanOut;
    targets.push(
      bound("fan-out, 1,000 subscribers on one run: delivery p99 at most 2x the bare ws broadcast's p99", oneRun.p99 / bareWs.p99, 2),
      // The fan-out's own CPU (its appends' measured apart, as the issue asks): the bare broadcast writes no table.
      bound(
        "fan-out server CPU (the appends' own cost apart) at most 1.1x the bare ws broadcast",
        (oneRun.serverCores - (fanOut.oneSubscriber?.serverCores ?? 0)) / bareWs.serverCores,
        1.1,
      ),
      bound('10,000 idle subscribers: connect and subscribe at most 3x bare ws connects', idle.connectSeconds / idle.bareConnectSeconds, 3),
      bound('memory per idle subscriber at most 32 KiB (10,000; KiB)', ((idle.rssMiB - idle.rssIdleMiB) * 1024) / idle.subscribers, 32),
    );
  }
  for (const [attack, { p99 }] of Object.entries(hostile ?? {}))
    targets.push(bound(`${attack}: another tenant's p99 at most ${HOSTILE_P99_TARGET_MS} ms (ms)`, p99, HOSTILE_P99_TARGET_MS));
  // Guards: what the round must not lose (a bound from below).
  const atLeast = (target: string, now: number, limit: number) => targets.push(bound(target, now, limit, false));
  const lone = contention?.[0];
  if (lone)
    atLeast(
      'a lone writer with group commit at least 0.95x of off (guard)',
      lone.groupCommit.appendsPerSecond / lone.withoutGroupCommit.appendsPerSecond,
      0.95,
    );
  if (leases)
    atLeast(
      "leases at least 0.5x of the SDK's put-if-free + delete (guard)",
      leases.api.acquisitionsPerSecond / leases.raw.acquisitionsPerSecond,
      0.5,
    );
  return targets;
}

/** The targets as README's table: target, now, met. */
export function targetsTable(targets: Target[]) {
  const figure = (t: Target) =>
    t.target.endsWith('(ms)') ? `${t.now.toFixed(0)} ms` : t.target.includes('KiB') ? `${t.now.toFixed(1)} KiB` : `${t.now.toFixed(2)}x`;
  return [
    '| target | now | met |',
    '| --- | --- | --- |',
    ...targets.map(
      (t) => `| ${t.target.replace(' (10,000; KiB)', ' (10,000)').replace(' (ms)', '')} | ${figure(t)} | ${t.met ? 'yes' : 'no'} |`,
    ),
  ].join('\n');
}
