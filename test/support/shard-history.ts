/**
 * The history of the stream shards' lease rows, read back from the table's own stream: who
 * held each shard under which token, from when until the last renewal's end. Two holders of
 * one shard must never overlap.
 */
import type { _Record } from '@aws-sdk/client-dynamodb-streams';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { SYSTEM_TENANT } from '../../src/table/keys.ts';

export interface Tenure {
  shard: string;
  owner: string;
  token: number;
  from: number;
  /** The latest end the lease was given (renewed or handed back). */
  until: number;
}

export function tenures(records: _Record[]): Tenure[] {
  const byToken = new Map<string, Tenure>();
  for (const record of records) {
    const image = record.dynamodb?.NewImage;
    if (!image) continue;
    const row = unmarshall(image as never) as Record<string, unknown>;
    if (!String(row.pk).startsWith(`${SYSTEM_TENANT}#unit#`) || row.sk !== 'lease') continue;
    const shard = String(row.unitId);
    const token = Number(row.token);
    const key = `${shard}\u0000${token}`;
    const seen = byToken.get(key);
    const until = Number(row.leaseUntil);
    if (seen) seen.until = until;
    else byToken.set(key, { shard, owner: String(row.owner), token, from: Date.parse(String(row.acquiredAt)), until });
  }
  return [...byToken.values()];
}

/** Every pair of tenures of one shard by different owners that overlap in time (none expected). */
export function overlaps(all: Tenure[]) {
  const found: string[] = [];
  const byShard = new Map<string, Tenure[]>();
  for (const t of all) byShard.set(t.shard, [...(byShard.get(t.shard) ?? []), t]);
  for (const list of byShard.values()) {
    list.sort((a, b) => a.token - b.token);
    for (let i = 1; i < list.length; i++) {
      const [before, after] = [list[i - 1] as Tenure, list[i] as Tenure];
      if (before.owner !== after.owner && after.from < before.until) {
        found.push(
          `${after.owner} took ${after.shard} (token ${after.token}) at ${after.from}, before ${before.owner}'s token ${before.token} ended at ${before.until}`,
        );
      }
    }
  }
  return found;
}

/** Lease row writes (in stream order) made under a token older than one already seen for the shard: a stale holder's (none expected). */
export function staleWrites(records: _Record[]) {
  const newest = new Map<string, number>();
  const found: string[] = [];
  for (const record of records) {
    const image = record.dynamodb?.NewImage;
    if (!image) continue;
    const row = unmarshall(image as never) as Record<string, unknown>;
    if (!String(row.pk).startsWith(`${SYSTEM_TENANT}#unit#`) || row.sk !== 'lease') continue;
    const shard = String(row.unitId);
    const token = Number(row.token);
    if (token < (newest.get(shard) ?? 0)) found.push(`${row.owner} wrote ${shard} with token ${token} after token ${newest.get(shard)}`);
    newest.set(shard, Math.max(token, newest.get(shard) ?? 0));
  }
  return found;
}
