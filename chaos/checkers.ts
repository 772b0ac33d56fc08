/**
 * The invariants, checked over the history and the table as it stands afterwards. Each
 * returns what it found broken, as sentences; none found is an empty list.
 */
import type { History, Operation } from './history.ts';
import type { Subscription } from './workload.ts';

export interface StoredEvent {
  seq: number;
  op: string | null;
}

export interface Snapshot {
  /** Events per run, in seq order, read straight from the table. */
  events: Map<string, StoredEvent[]>;
  budgets: Map<string, { cap: number; spent: number }>;
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

/** Every subscriber got every event of its run once, in seq order, across its reconnects. */
export function checkSubscriptions(subscriptions: Subscription[], snapshot: Snapshot): string[] {
  const found: string[] = [];
  for (const [i, subscription] of subscriptions.entries()) {
    const stored = snapshot.events.get(subscription.runId) ?? [];
    const got = subscription.events;
    const name = `subscriber ${i} (run ${subscription.runId}, ${subscription.resumes} resumes)`;
    if (got.length !== stored.length) found.push(`${name}: got ${got.length} events, the run has ${stored.length}`);
    for (let k = 0; k < Math.min(got.length, stored.length); k++) {
      if (got[k]?.seq !== k + 1 || got[k]?.op !== stored[k]?.op) {
        found.push(`${name}: event ${k + 1} is seq ${got[k]?.seq} (${got[k]?.op}), the table has ${stored[k]?.op}`);
        break;
      }
    }
  }
  return found;
}

/**
 * One holder at a time: while an owner's lease is live (from the server time it was granted
 * or renewed to its expiresAt, cut short by an acknowledged release), no other owner is
 * granted the unit. Grants are read from the answers (server clocks: one machine here).
 * A lease with a release of unknown outcome is skipped: it may have ended at any time.
 */
export function checkMutualExclusion(history: History): string[] {
  const found: string[] = [];
  const ms = (v: unknown) => new Date(v as string).getTime();
  type Grant = { op: Operation; owner: string; token: number; from: number; until: number };
  const byUnit = new Map<string, Operation[]>();
  for (const op of history.operations) {
    if (!['acquire', 'renew', 'release'].includes(op.kind)) continue;
    const unit = op.input.unitId as string;
    byUnit.set(unit, [...(byUnit.get(unit) ?? []), op]);
  }
  for (const [unit, ops] of byUnit) {
    const lease = (o: Operation) => o.outcome === 'acknowledged' && o.result?.__typename === 'Lease';
    const grants: Grant[] = ops
      .filter((o) => (o.kind === 'acquire' || o.kind === 'renew') && lease(o))
      .map((o) => {
        const until = ms(o.result?.expiresAt);
        // A renew answers with the original acquiredAt; it was granted ttl before its new end.
        const from = o.kind === 'acquire' ? ms(o.result?.acquiredAt) : until - (o.input.ttlSeconds as number) * 1000;
        return { op: o, owner: o.input.owner as string, token: o.result?.token as number, from, until };
      });
    const reported = new Set<Grant>();
    for (const a of grants) {
      // The owner's lease ends early when it releases it, or takes the unit again (a larger
      // token, by either incarnation) and releases that; a release of unknown outcome may have
      // ended it at any time.
      const releases = ops.filter((o) => o.kind === 'release' && o.input.owner === a.owner && (o.input.token as number) >= a.token);
      if (releases.some((r) => r.outcome === 'unknown')) continue;
      const released = releases.filter(lease).map((r) => ms(r.result?.expiresAt));
      const end = Math.min(a.until, ...released.filter((t) => t >= a.from));
      for (const b of grants) {
        if (b.op.kind !== 'acquire' || b.owner === a.owner || reported.has(b)) continue;
        if (b.from > a.from && b.from < end) {
          reported.add(b);
          found.push(
            `unit ${unit}: ${b.owner} was given token ${b.token} at ${b.from} while ${a.owner} held token ${a.token} (${a.op.kind} at ${a.from}, live until ${end})`,
          );
        }
      }
    }
  }
  return found;
}

/** The probe's subscriber (never dropped) got each acknowledged probe event within `maxMs` of its acknowledgement. */
export function checkDeliveryLatency(history: History, subscriptions: Subscription[], probeRun: string, maxMs: number): string[] {
  const found: string[] = [];
  const probe = subscriptions.find((s) => s.stable && s.runId === probeRun);
  if (!probe) return [`no subscriber on the probe run ${probeRun}`];
  for (const o of history.operations) {
    if (o.client !== 'prober' || o.outcome !== 'acknowledged') continue;
    const seq = o.result?.seq as number;
    const i = probe.events.findIndex((e) => e.seq === seq);
    if (i < 0) continue; // checkSubscriptions reports it
    const late = (probe.received?.[i] ?? Number.NaN) - o.end;
    if (late > maxMs) found.push(`probe event ${seq} reached its (connected) subscriber ${late.toFixed(0)} ms after it was acknowledged`);
  }
  return found;
}
