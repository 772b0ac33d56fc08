/**
 * A row of the table as the change subscribers are told of: the one decoding both the stream's
 * records and the rows this server writes go through, so the two always agree.
 */
import type { Change } from '../domain/change.ts';
import type { Item } from './attributes.ts';
import { toBudget, toClaim, toEvent, toLease, toOutputChunk, toRun } from './codec.ts';
import { LEASE_SK, outputOfSk, parseRunPartition, RUN_BUDGET_SK, RUN_CLAIM_SK, RUN_META_SK, SYSTEM_TENANT, seqOfSk } from './keys.ts';

const LEASE_PARTITION = /^([^#]+)#unit#([^#]+)$/;

/** Whether subscribers watch the row at this key (a run's head rows and events, a tenant's leases). */
export function isWatched(pk: string, sk: string): boolean {
  const run = parseRunPartition(pk);
  // An event shard's partition holds events only.
  if (run?.shard !== undefined) return seqOfSk(sk) !== undefined;
  if (run)
    return sk === RUN_META_SK || sk === RUN_BUDGET_SK || sk === RUN_CLAIM_SK || seqOfSk(sk) !== undefined || outputOfSk(sk) !== undefined;
  const lease = LEASE_PARTITION.exec(pk);
  // Shard leases are Runplane's own: no subscriber watches them.
  return Boolean(lease && sk === LEASE_SK && lease[1] !== SYSTEM_TENANT);
}

/** The change a row is, or undefined for rows subscribers do not watch. */
export function changeOfRow(item: Item): Change | undefined {
  const pk = String(item.pk);
  const sk = String(item.sk);
  if (!isWatched(pk, sk)) return undefined;
  const partition = parseRunPartition(pk);
  if (partition) {
    const run = { tenant: partition.tenant, runId: partition.runId };
    if (sk === RUN_META_SK) return { kind: 'run', ...run, run: toRun(item) };
    if (sk === RUN_BUDGET_SK) return { kind: 'budget', ...run, budget: toBudget(item) };
    if (sk === RUN_CLAIM_SK) {
      // A holderless row (a claim ended on a run nobody claimed) tells a subscriber nothing.
      const claim = toClaim(item);
      return claim ? { kind: 'claim', ...run, claim } : undefined;
    }
    if (seqOfSk(sk) !== undefined) return { kind: 'event', ...run, event: toEvent(item) };
    return { kind: 'output', ...run, chunk: toOutputChunk(item) };
  }
  const [, tenant, unitId] = LEASE_PARTITION.exec(pk) as RegExpExecArray;
  return { kind: 'lease', tenant: tenant as string, unitId: unitId as string, lease: toLease(item) };
}
