/** Stream records turned into domain changes: an event appended, a run or budget changed, a lease changed. */
import type { _Record } from '@aws-sdk/client-dynamodb-streams';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Change } from '../domain/change.ts';
import { changeOfRow } from '../table/changes.ts';
import { unmarshallOptions } from '../table/client.ts';

export type { Change } from '../domain/change.ts';

/** Where a change is published: subscribers listen on one of these. */
export const topics = {
  events: (tenant: string, runId: string) => `events\u0000${tenant}\u0000${runId}`,
  run: (tenant: string, runId: string) => `run\u0000${tenant}\u0000${runId}`,
  lease: (tenant: string, unitId: string) => `lease\u0000${tenant}\u0000${unitId}`,
  /** Every run (and budget) change of a tenant. */
  runs: (tenant: string) => `runs\u0000${tenant}`,
  /** Every lease change of a tenant. */
  leases: (tenant: string) => `leases\u0000${tenant}`,
  /** One output stream of a run. */
  output: (tenant: string, runId: string, stream: string) => `output\u0000${tenant}\u0000${runId}\u0000${stream}`,
};

/** The tenant-wide topic a change is also published on, if any. */
export function tenantTopicOf(change: Change) {
  if (change.kind === 'event' || change.kind === 'claim' || change.kind === 'output') return undefined;
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
    case 'output':
      return topics.output(change.tenant, change.runId, change.chunk.stream);
  }
}

/** The change a stream record describes, or undefined for rows subscribers do not watch (and removals). */
export function decodeRecord(record: _Record): Change | undefined {
  const image = record.dynamodb?.NewImage;
  if (!image || record.eventName === 'REMOVE') return undefined;
  return changeOfRow(unmarshall(image as never, unmarshallOptions));
}
