/**
 * Moving a run to another status, conditioned on the status (and version) the caller saw, and
 * (fenced) on the caller's claim being the run's live one. A run reaching a terminal status
 * gets its TTL, and its budget and claim rows with it; its claim ends.
 */
import { randomUUID } from 'node:crypto';
import { ClaimLost, RunNotFound, StatusConflict } from '../../domain/errors.ts';
import { isTerminal, type Run, type RunStatus } from '../../domain/run.ts';
import { attr } from '../../table/attributes.ts';
import { toClaim, toRun } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { ConditionFailed, type TransactItem, type Write, write } from '../write.ts';
import { claimEnd, fence } from './claim-writes.ts';
import type { RunReads } from './read.ts';

export interface Transition {
  tenant: string;
  runId: string;
  from: RunStatus;
  to: RunStatus;
  /** Only if the run is still at this version (optimistic concurrency). */
  expectedVersion?: number;
  /** Only while this token is the run's live claim (ClaimLost otherwise). */
  fencingToken?: number;
}

/** The metadata update; `expires` (epoch seconds) for a run that finishes with it. */
export function metaUpdate(
  tableName: string,
  { tenant, runId, from, to, expectedVersion }: Transition,
  at: Date,
  writeId: string,
  expires?: number,
): Write {
  const versioned = expectedVersion !== undefined;
  return {
    Update: {
      TableName: tableName,
      Key: keys.run(tenant, runId),
      // The run exists (and has not expired), is still where the caller saw it, and at the version it saw.
      ConditionExpression: [
        conditions.present,
        conditions.statusIs,
        '(attribute_not_exists(#ttl) OR #ttl > :nowSeconds)',
        ...(versioned ? ['#version = :expectedVersion'] : []),
      ].join(' AND '),
      UpdateExpression: `SET #status = :to, #updatedAt = :now, gsi2pk = :listing, #writeId = :writeId${expires !== undefined ? ', #ttl = :expires' : ''} ADD #version :one`,
      ExpressionAttributeNames: {
        '#status': attr.status,
        '#updatedAt': attr.updatedAt,
        '#version': attr.version,
        '#writeId': attr.writeId,
        '#ttl': attr.ttl,
      },
      ExpressionAttributeValues: {
        ':from': from,
        ':to': to,
        ':now': at.toISOString(),
        ':nowSeconds': Math.floor(at.getTime() / 1000),
        ':listing': keys.runListing(tenant, runId, to, '').gsi2pk,
        ':one': 1,
        ':writeId': writeId,
        ...(expires !== undefined ? { ':expires': expires } : {}),
        ...(versioned ? { ':expectedVersion': expectedVersion } : {}),
      },
    },
  };
}

/** A finished run's budget row expires with it (its events are given the same TTL afterwards). */
export function budgetExpiry(tableName: string, { tenant, runId }: Transition, expires: number): Write {
  return {
    Update: {
      TableName: tableName,
      Key: keys.budget(tenant, runId),
      // Only the run's own budget row: a TTL must not create a row for a run that has none.
      ConditionExpression: conditions.present,
      UpdateExpression: 'SET #ttl = :expires',
      ExpressionAttributeNames: { '#ttl': attr.ttl },
      ExpressionAttributeValues: { ':expires': expires },
    },
  };
}

/**
 * Applies the transition (after a claim); returns the run when the write returned it (an
 * update alone), undefined after a transaction (a finishing run, a claim).
 * @throws StatusConflict, RunNotFound
 */
export async function transitionRun(
  deps: StoreDeps,
  reads: RunReads,
  onFinished: (expires: number) => void,
  input: Transition,
  claim?: TransactItem,
): Promise<Run | undefined> {
  const { tableName, now, retention } = deps;
  const writeId = randomUUID();
  const at = now();
  const expires = isTerminal(input.to) ? Math.floor(at.getTime() / 1000) + retention.finishedRunSeconds : undefined;
  const { tenant, runId, fencingToken: token } = input;
  const writes = [metaUpdate(tableName, input, at, writeId, expires)];
  // A finished run has no holder: its claim ends with it (fenced: the holder's own claim, still live).
  if (expires !== undefined)
    writes.push(
      budgetExpiry(tableName, input, expires),
      claimEnd(tableName, tenant, runId, at.getTime(), { token, expires, why: 'FINISHED' }),
    );
  else if (token !== undefined) writes.push(fence(tableName, tenant, runId, token, at.getTime()));
  try {
    const after = await write(deps, writes, claim, { operation: 'transition' });
    if (expires !== undefined) onFinished(expires);
    return after ? toRun(after) : undefined;
  } catch (err) {
    if (!(err instanceof ConditionFailed)) throw err;
    // A superseded worker learns that first, also when the run has moved on meanwhile.
    const fenceFailed = token !== undefined ? err.failedAt(writes.length - 1) : undefined;
    // A run that does not exist (no run row) is not found, fenced or not, as an append's is.
    if (fenceFailed && !err.missingAt(0)) throw new ClaimLost(runId, toClaim(fenceFailed.item), at.getTime(), token);
    const found = err.index === 0 ? reads.live(err.item) : await reads.meta(input.tenant, input.runId);
    if (!found) throw new RunNotFound(input.runId);
    // The SDK resent this transition after a lost response: it was applied.
    if (found[attr.writeId] === writeId) return toRun(found);
    const current = toRun(found);
    throw new StatusConflict(input.runId, input.from, current.status, current.version, input.expectedVersion);
  }
}
