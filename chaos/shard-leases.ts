/**
 * The history of the stream shards' lease rows, read back from the table's own stream: who
 * held each shard under which token, from when until the last renewal's end. Two holders of
 * one shard must never overlap.
 */
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { SYSTEM_TENANT } from '../src/table/keys.ts';

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
    // Stream shards' leases only: other system leases (the stall watcher's) are not shards.
    if (!String(row.unitId).startsWith('shardId-')) continue;
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
    // Stream shards' leases only: other system leases (the stall watcher's) are not shards.
    if (!String(row.unitId).startsWith('shardId-')) continue;
    const shard = String(row.unitId);
    const token = Number(row.token);
    if (token < (newest.get(shard) ?? 0)) found.push(`${row.owner} wrote ${shard} with token ${token} after token ${newest.get(shard)}`);
    newest.set(shard, Math.max(token, newest.get(shard) ?? 0));
  }
  return found;
}

/** Every stream record of the table, from the oldest kept (lease rows among them). */
export async function tableStream(engineEndpoint: string, table: string) {
  const dynamo = new DynamoDBClient({
    endpoint: engineEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'c', secretAccessKey: 'c' },
  });
  const streams = new DynamoDBStreamsClient({
    endpoint: engineEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'c', secretAccessKey: 'c' },
  });
  try {
    const { Table } = await dynamo.send(new DescribeTableCommand({ TableName: table }));
    const arn = Table?.LatestStreamArn as string;
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: arn }));
    const records: _Record[] = [];
    // Shards in listing order: parents before children, as the engine lists them.
    for (const shard of StreamDescription?.Shards ?? []) {
      let iterator = (
        await streams.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }))
      ).ShardIterator;
      while (iterator) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
        records.push(...(page.Records ?? []));
        if (!page.Records?.length) break;
        iterator = page.NextShardIterator;
      }
    }
    return records;
  } finally {
    dynamo.destroy();
    streams.destroy();
  }
}

/** The shard-lease invariants over the table's stream: never two holders at once, never a write under a superseded token. */
export async function checkShardLeases(engineEndpoint: string, table: string) {
  const records = await tableStream(engineEndpoint, table);
  const held = tenures(records);
  if (held.length === 0) return ['no shard lease was ever taken: the replicas read nothing'];
  return [...overlaps(held), ...staleWrites(records)];
}

/**
 * Lease rows taken on a child shard before its parent's row said drained (in stream order; a
 * parent never read by anyone has no row and holds nothing up). None expected.
 */
export function lineageViolations(records: _Record[], parents: Map<string, string>) {
  const drained = new Set<string>();
  const held = new Set<string>();
  const found: string[] = [];
  for (const record of records) {
    const image = record.dynamodb?.NewImage;
    if (!image) continue;
    const row = unmarshall(image as never) as Record<string, unknown>;
    if (!String(row.pk).startsWith(`${SYSTEM_TENANT}#unit#`) || row.sk !== 'lease') continue;
    // Stream shards' leases only: other system leases (the stall watcher's) are not shards.
    if (!String(row.unitId).startsWith('shardId-')) continue;
    const shard = String(row.unitId);
    const parent = parents.get(shard);
    if (!held.has(shard) && parent && held.has(parent) && !drained.has(parent)) {
      found.push(`${row.owner} took ${shard} before its parent ${parent} was drained`);
    }
    held.add(shard);
    if (row.drained === true) drained.add(shard);
  }
  return found;
}
