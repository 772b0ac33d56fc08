/**
 * Reading the stall index: the live claims listed by when they run out, over
 * CLAIM_INDEX_SHARDS index partitions (keys.claimListing), for the stall watcher.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { RunClaim } from '../../domain/run.ts';
import { toClaim } from '../../table/codec.ts';
import { indexes } from '../../table/definition.ts';
import { CLAIM_INDEX_SHARDS, keys, parseRunPartition } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';

export interface ExpiredClaim {
  tenant: string;
  runId: string;
  claim: RunClaim;
}

/**
 * Claims that ran out by `atMs`, from every shard: the `perEnd` that ran out first and, when
 * there are more, the `perEnd` that ran out last, each claim once, oldest first. The last are
 * read too so that a backlog deeper than one read (one tenant's thousands) cannot hide a claim
 * that has just run out. At most 2 × perEnd × CLAIM_INDEX_SHARDS claims from two Queries a shard,
 * one page each (claim rows are small: a page of 1 MB holds hundreds of them; a page cut short
 * reads fewer this time). Eventually consistent: a claim renewed a moment ago may still show its
 * old end.
 */
export async function readExpiredClaims({ doc, tableName }: StoreDeps, atMs: number, perEnd: number): Promise<ExpiredClaim[]> {
  const query = (shard: number, oldestFirst: boolean) =>
    doc.send(
      new QueryCommand({
        TableName: tableName,
        IndexName: indexes.runsByTenant.name,
        KeyConditionExpression: 'gsi1pk = :shard AND gsi1sk < :bound',
        ExpressionAttributeValues: { ':shard': keys.claimShard(shard), ':bound': keys.claimsEndedBy(atMs) },
        ScanIndexForward: oldestFirst,
        Limit: perEnd,
      }),
    );
  const shards = await Promise.all(
    Array.from({ length: CLAIM_INDEX_SHARDS }, async (_, shard) => {
      const first = await query(shard, true);
      // The whole range was read: nothing more at its other end.
      if (!first.LastEvaluatedKey) return first.Items ?? [];
      const last = await query(shard, false);
      return [...(first.Items ?? []), ...(last.Items ?? [])];
    }),
  );
  // One entry per run (the two reads may meet, and a row renewed between them shows twice), in
  // index order: by end, then tenant and run.
  const rows = new Map<string, Record<string, unknown>>();
  for (const item of shards.flat()) if (!rows.has(String(item.pk))) rows.set(String(item.pk), item);
  const found: ExpiredClaim[] = [];
  for (const item of [...rows.values()].sort((a, b) => (String(a.gsi1sk) < String(b.gsi1sk) ? -1 : 1))) {
    const run = parseRunPartition(String(item.pk));
    const claim = toClaim(item);
    if (run && claim) found.push({ ...run, claim });
  }
  return found;
}
