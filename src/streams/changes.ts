/** Stream records turned into domain changes: an event appended, a run or budget changed, a lease changed. */
import type { _Record } from '@aws-sdk/client-dynamodb-streams';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Budget, Lease, Run, RunClaim, RunEvent } from '../domain/run.ts';
import { unmarshallOptions } from '../table/client.ts';
import { toBudget, toClaim, toEvent, toLease, toRun } from '../table/codec.ts';
import { LEASE_SK, parseRunPartition, RUN_BUDGET_SK, RUN_CLAIM_SK, RUN_META_SK, SYSTEM_TENANT, seqOfSk } from '../table/keys.ts';

export type Change =
  | { kind: 'event'; tenant: string; runId: string; event: RunEvent }
  | { kind: 'run'; tenant: string; runId: string; run: Run }
  | { kind: 'budget'; tenant: string; runId: string; budget: Budget }
  | { kind: 'claim'; tenant: string; runId: string; claim: RunClaim }
  | { kind: 'lease'; tenant: string; unitId: string; lease: Lease };

/** Where a change is published: subscribers listen on one of these. */
export const topics = {
  events: (tenant: string, runId: string) => `events\u0000${tenant}\u0000${runId}`,
  run: (tenant: string, runId: string) => `run\u0000${tenant}\u0000${runId}`,
  lease: (tenant: string, unitId: string) => `lease\u0000${tenant}\u0000${unitId}`,
  /** Every run (and budget) change of a tenant. */
  runs: (tenant: string) => `runs\u0000${tenant}`,
  /** Every lease change of a tenant. */
  leases: (tenant: string) => `leases\u0000${tenant}`,
};

/** The tenant-wide topic a change is also published on, if any. */
export function tenantTopicOf(change: Change) {
  if (change.kind === 'event' || change.kind === 'claim') return undefined;
  return change.kind === 'lease' ? topics.leases(change.tenant) : topics.runs(change.tenant);
}

export function topicOf(change: Change) {
  switch (change.kind) {
    case 'event':
      return topics.events(change.tenant, change.runId);
    case 'run':
    case 'budget':
    case 'claim':
      return topics.run(change.tenant, change.runId);
    case 'lease':
      return topics.lease(change.tenant, change.unitId);
  }
}

const LEASE_PARTITION = /^([^#]+)#unit#([^#]+)$/;

/** The change a stream record describes, or undefined for rows subscribers do not watch (and removals). */
export function decodeRecord(record: _Record): Change | undefined {
  const image = record.dynamodb?.NewImage;
  if (!image || record.eventName === 'REMOVE') return undefined;
  const item = unmarshall(image as never, unmarshallOptions) as Record<string, unknown>;
  const pk = String(item.pk);
  const sk = String(item.sk);
  const run = parseRunPartition(pk);
  if (run) {
    if (sk === RUN_META_SK) return { kind: 'run', ...run, run: toRun(item) };
    if (sk === RUN_BUDGET_SK) return { kind: 'budget', ...run, budget: toBudget(item) };
    if (sk === RUN_CLAIM_SK) {
      // A holderless row (a claim ended on a run nobody claimed) tells a subscriber nothing.
      const claim = toClaim(item);
      return claim ? { kind: 'claim', ...run, claim } : undefined;
    }
    if (seqOfSk(sk) !== undefined) return { kind: 'event', ...run, event: toEvent(item) };
    return undefined;
  }
  const lease = LEASE_PARTITION.exec(pk);
  // Shard leases are Runplane's own: no subscriber watches them.
  if (lease && sk === LEASE_SK && lease[1] !== SYSTEM_TENANT)
    return { kind: 'lease', tenant: lease[1] as string, unitId: lease[2] as string, lease: toLease(item) };
  return undefined;
}
