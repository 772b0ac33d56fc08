/**
 * The invariants, checked over the history and the table as it stands afterwards. Each
 * returns what it found broken, as sentences; none found is an empty list.
 */
import type { History, Operation } from './history.ts';
import type { Subscription } from './workload.ts';

export interface StoredEvent {
  seq: number;
  op: string | null;
  type?: string;
  /** The claim token a run worker wrote it with (its payload's), or a run.stalled event's expired token. */
  token?: number;
  /** When the server wrote it (epoch ms). */
  at?: number;
}

export interface Snapshot {
  /** Events per run, in seq order, read straight from the table. */
  events: Map<string, StoredEvent[]>;
  budgets: Map<string, { cap: number; spent: number }>;
  /** Each run's status at the end. */
  statuses?: Map<string, string>;
}

const describe = (o: Operation) =>
  `${o.client} (${o.input.idempotencyKey ?? 'no key'}, ${o.attempts} attempts, ${o.start.toFixed(0)}-${o.end.toFixed(0)} ms)`;

const acked = (history: History, kind: Operation['kind']) =>
  history.operations.filter((o) => o.kind === kind && o.outcome === 'acknowledged');

/** Seqs 1..N, each once; every acknowledged append stored once at its seq; nothing stored twice. */
export function checkAppends(history: History, snapshot: Snapshot): string[] {
  const found: string[] = [];
  const where = new Map<string, string[]>();
  for (const [runId, events] of snapshot.events) {
    events.forEach((event, i) => {
      if (event.seq !== i + 1) found.push(`run ${runId}: seq ${event.seq} stored at position ${i + 1} (a gap or a duplicate)`);
      if (event.op) where.set(event.op, [...(where.get(event.op) ?? []), `${runId}#${event.seq}`]);
    });
  }
  for (const [op, places] of where) if (places.length > 1) found.push(`append ${op} stored ${places.length} times: ${places.join(', ')}`);
  const known = new Set(history.operations.filter((o) => o.kind === 'append').map((o) => (o.input.payload as { op: string }).op));
  for (const op of where.keys()) if (!known.has(op)) found.push(`an event no client sent: ${op}`);
  for (const append of history.operations.filter((o) => o.kind === 'append')) {
    const op = (append.input.payload as { op: string }).op;
    const places = where.get(op) ?? [];
    if (append.outcome === 'acknowledged') {
      const at = `${append.input.runId}#${append.result?.seq}`;
      if (!places.includes(at)) found.push(`acknowledged append ${op} at ${at} is ${places.length ? `at ${places.join(', ')}` : 'lost'}`);
    }
    if (append.outcome === 'refused' && places.length > 0) found.push(`refused append ${op} was stored at ${places.join(', ')}`);
  }
  return found;
}

/** Spent never passes the cap, and is exactly the sum of what was acknowledged as charged. */
export function checkBudgets(history: History, snapshot: Snapshot): string[] {
  const found: string[] = [];
  for (const [runId, { cap, spent }] of snapshot.budgets) {
    if (spent > cap) found.push(`run ${runId}: spent ${spent} passes the cap ${cap}`);
    const charged =
      acked(history, 'charge')
        .filter((o) => o.input.runId === runId)
        .reduce((sum, o) => sum + (o.input.amount as number), 0) +
      acked(history, 'append')
        .filter((o) => o.input.runId === runId && o.input.cost)
        .reduce((sum, o) => sum + (o.input.cost as number), 0);
    if (spent !== charged) found.push(`run ${runId}: spent ${spent}, but acknowledged charges add up to ${charged}`);
  }
  return found;
}

/**
 * Tokens grow with real time (an acquire that began after another was acknowledged has a
 * larger token), and a holder's renew or release is only accepted while its token is the
 * largest given out: one acknowledged after a larger token was issued would be a second holder.
 */
export function checkLeases(history: History): string[] {
  const found: string[] = [];
  const byUnit = new Map<string, Operation[]>();
  for (const op of history.operations) {
    if (!['acquire', 'renew', 'release'].includes(op.kind) || op.outcome !== 'acknowledged') continue;
    const unit = op.input.unitId as string;
    byUnit.set(unit, [...(byUnit.get(unit) ?? []), op]);
  }
  for (const [unit, ops] of byUnit) {
    const acquires = ops.filter((o) => o.kind === 'acquire');
    const byToken = new Map<number, Operation>();
    for (const a of acquires) {
      const token = a.result?.token as number;
      const twin = byToken.get(token);
      if (twin) found.push(`unit ${unit}: token ${token} given to ${describe(twin)} and to ${describe(a)}`);
      byToken.set(token, a);
    }
    for (const a of acquires) {
      for (const b of acquires) {
        if (a.end < b.start && (b.result?.token as number) <= (a.result?.token as number)) {
          found.push(`unit ${unit}: token ${b.result?.token} issued after token ${a.result?.token}`);
        }
      }
    }
    for (const fenced of ops.filter((o) => o.kind !== 'acquire')) {
      const token = fenced.input.token as number;
      const newer = acquires.find((a) => a.end < fenced.start && (a.result?.token as number) > token);
      if (newer) {
        found.push(
          `unit ${unit}: ${fenced.kind} by ${fenced.client} with token ${token} accepted after token ${newer.result?.token} was issued`,
        );
      }
    }
  }
  return found;
}

/**
 * Every subscriber got every event of its run once, in seq order, across its reconnects.
 * `excused`: events (by op) that filled a hole so late that the feed may have stepped over it.
 */
export function checkSubscriptions(subscriptions: Subscription[], snapshot: Snapshot, excused: Set<string> = new Set()): string[] {
  const found: string[] = [];
  for (const [i, subscription] of subscriptions.entries()) {
    const keep = (e: StoredEvent) => !e.op || !excused.has(e.op);
    const stored = (snapshot.events.get(subscription.runId) ?? []).filter(keep);
    const got = subscription.events.filter(keep);
    const name = `subscriber ${i} (run ${subscription.runId}, ${subscription.resumes} resumes)`;
    if (got.length !== stored.length) found.push(`${name}: got ${got.length} events, the run has ${stored.length}`);
    for (let k = 0; k < Math.min(got.length, stored.length); k++) {
      if (got[k]?.seq !== stored[k]?.seq || got[k]?.op !== stored[k]?.op) {
        found.push(`${name}: event ${k + 1} is seq ${got[k]?.seq} (${got[k]?.op}), the table has ${stored[k]?.op}`);
        break;
      }
    }
  }
  return found;
}

/**
 * One holder at a time. Each acquire writes a larger token, so tokens order a unit's grants
 * as they were written, and a grant takes over the lease with the next smaller token. When
 * that lease is another owner's, it must have ended (expired, or been released) by the
 * grant's time. An owner taking its own unit again needs no gap (a new token, one holder).
 * Times are the servers' own from the answers: a lease ends at its last acknowledged
 * renew's expiresAt, or at its release. A plain release answered LeaseLost may still have
 * taken effect (its answer lost, the resend finding the unit taken), as may one of unknown
 * outcome: either may have ended the lease from when it was sent. A plain acquire without
 * an acknowledgement may have been granted all the same, out of sight: a pair it could come
 * between on either owner's side is not judged.
 */
export function checkMutualExclusion(history: History): string[] {
  const found: string[] = [];
  const ms = (v: unknown) => new Date(v as string).getTime();
  const byUnit = new Map<string, Operation[]>();
  for (const op of history.operations) {
    if (!['acquire', 'renew', 'release'].includes(op.kind)) continue;
    const unit = op.input.unitId as string;
    byUnit.set(unit, [...(byUnit.get(unit) ?? []), op]);
  }
  for (const [unit, ops] of byUnit) {
    const granted = (o: Operation) => o.outcome === 'acknowledged' && o.result?.__typename === 'Lease';
    const ofToken = (kind: Operation['kind'], token: number) => ops.filter((o) => o.kind === kind && o.input.token === token);
    const leases = ops
      .filter((o) => o.kind === 'acquire' && granted(o))
      .map((acquire) => {
        const token = acquire.result?.token as number;
        const renewed = ofToken('renew', token).filter(granted);
        const releases = ofToken('release', token);
        const ends = [
          Math.max(ms(acquire.result?.expiresAt), ...renewed.map((r) => ms(r.result?.expiresAt))),
          ...releases.filter(granted).map((r) => ms(r.result?.expiresAt)),
          ...releases.filter((r) => !granted(r)).map((r) => r.sentAt),
        ];
        return { acquire, token, owner: acquire.input.owner as string, from: ms(acquire.result?.acquiredAt), end: Math.min(...ends) };
      })
      .sort((a, b) => a.token - b.token);
    const unseen = ops.filter((o) => o.kind === 'acquire' && o.outcome !== 'acknowledged' && !o.input.idempotencyKey);
    for (let i = 1; i < leases.length; i++) {
      const before = leases[i - 1] as (typeof leases)[number];
      const taker = leases[i] as (typeof leases)[number];
      if (taker.owner === before.owner || taker.from >= before.end) continue;
      const between = unseen.some(
        (o) => [before.owner, taker.owner].includes(o.input.owner as string) && o.start < taker.acquire.end && o.end > before.acquire.start,
      );
      if (between) continue;
      found.push(
        `unit ${unit}: ${taker.owner} was given token ${taker.token} at ${taker.from} while ${before.owner}'s lease with token ${before.token} (from ${before.from}) was live until ${before.end}`,
      );
    }
  }
  return found;
}

/** The probe's subscriber (never dropped) got each acknowledged probe event within `maxMs` of its acknowledgement. */
export function checkDeliveryLatency(
  history: History,
  subscriptions: Subscription[],
  probeRun: string,
  { maxMs, baselineUntil }: { maxMs: number; baselineUntil: number },
): string[] {
  const probe = subscriptions.find((s) => s.stable && s.runId === probeRun);
  if (!probe) return [`no subscriber on the probe run ${probeRun}`];
  const deliveries: { end: number; seq: number; late: number }[] = [];
  for (const o of history.operations) {
    if (o.client !== 'prober' || o.outcome !== 'acknowledged') continue;
    const seq = o.result?.seq as number;
    const i = probe.events.findIndex((e) => e.seq === seq);
    if (i < 0) continue; // checkSubscriptions reports it
    deliveries.push({ end: o.end, seq, late: (probe.received?.[i] ?? Number.NaN) - o.end });
  }
  const before = deliveries.filter((d) => d.end < baselineUntil).map((d) => d.late);
  const allowed = Math.max(maxMs, 3 * Math.max(0, ...before));
  return deliveries
    .filter((d) => !(d.late <= allowed))
    .map(
      (d) =>
        `probe event ${d.seq} reached its (connected) subscriber ${d.late.toFixed(0)} ms after it was acknowledged (allowed ${allowed.toFixed(0)} ms; slowest before the faults ${Math.max(0, ...before).toFixed(0)} ms)`,
    );
}

/** How long a claim that ran out unreleased may leave its run RUNNING before it is found stalled or taken over (watcher lease failover and faults included). */
export const STALL_BOUND_MS = 10_000;

/**
 * Run claims, over the history and the claimed runs as the table holds them:
 * - fencing: the tokens of the workers' events never go down along the seqs, and no fenced
 *   append sent after a larger token's claim was acknowledged is stored;
 * - every claimed run ends COMPLETED (the closer's), and every run.stalled is followed by a
 *   run.reclaimed;
 * - a claim that ran out unreleased leaves its run RUNNING no longer than STALL_BOUND_MS: by
 *   then a run.stalled for its token, or another claim, came.
 */
export function checkClaims(history: History, snapshot: Snapshot, claimRuns: string[]): string[] {
  const found: string[] = [];
  const ms = (v: unknown) => new Date(v as string).getTime();
  for (const runId of claimRuns) {
    const events = snapshot.events.get(runId) ?? [];
    let highest = 0;
    for (const event of events) {
      if (event.type !== 'work' || event.token === undefined) continue;
      if (event.token < highest)
        found.push(`run ${runId}: seq ${event.seq} written with token ${event.token} after token ${highest} had written`);
      highest = Math.max(highest, event.token);
    }
    const claims = history.operations.filter((o) => o.kind === 'claim' && o.outcome === 'acknowledged' && o.input.runId === runId);
    for (const append of history.operations.filter(
      (o) => o.kind === 'append' && o.input.runId === runId && o.input.fencingToken !== undefined,
    )) {
      const token = append.input.fencingToken as number;
      const superseded = claims.find((c) => (c.result?.token as number) > token && c.end < append.start);
      const op = (append.input.payload as { op: string }).op;
      if (superseded && events.some((e) => e.op === op))
        found.push(`run ${runId}: ${op} (token ${token}) is stored though it was sent after token ${superseded.result?.token} was claimed`);
    }
    const status = snapshot.statuses?.get(runId);
    if (status !== 'COMPLETED') found.push(`run ${runId} ended ${status ?? 'unread'}, not COMPLETED`);
    events.forEach((event, i) => {
      if (event.type === 'run.stalled' && !events.slice(i + 1).some((later) => later.type === 'run.reclaimed'))
        found.push(`run ${runId}: stalled at seq ${event.seq} and never taken over`);
    });
    // Ended by its holder: released, or the run finished with it (the closer's).
    const released = new Set(
      history.operations
        .filter((o) => (o.kind === 'releaseClaim' || o.kind === 'close') && o.outcome === 'acknowledged' && o.input.runId === runId)
        .map((o) => o.input.token ?? o.input.fencingToken),
    );
    for (const claim of claims) {
      const token = claim.result?.token as number;
      if (released.has(token)) continue;
      const ends = history.operations
        .filter(
          (o) =>
            (o.kind === 'claim' || o.kind === 'renewClaim') &&
            o.outcome === 'acknowledged' &&
            o.input.runId === runId &&
            o.result?.token === token,
        )
        .map((o) => ms(o.result?.expiresAt));
      const end = Math.max(...ends);
      const stalled = events.some(
        (e) => e.type === 'run.stalled' && e.token === token && (e.at ?? Number.POSITIVE_INFINITY) <= end + STALL_BOUND_MS,
      );
      const succeeded = claims.some((c) => (c.result?.token as number) > token && ms(c.result?.acquiredAt) <= end + STALL_BOUND_MS);
      if (!stalled && !succeeded)
        found.push(
          `run ${runId}: the claim with token ${token} ran out at ${new Date(end).toISOString()} and was neither found stalled nor taken over within ${STALL_BOUND_MS} ms`,
        );
    }
  }
  return found;
}
