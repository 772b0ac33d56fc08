/**
 * The cursor of a listing spread over RUN_LIST_SHARDS index partitions: each shard's position
 * (the sort key of the last item handed out; '' for none yet; null when the shard is done).
 */
import { InvalidInput } from '../domain/errors.ts';
import { RUN_LIST_SHARDS } from '../table/keys.ts';

export type ShardPositions = (string | null)[];

export const startPositions = (): ShardPositions => Array.from({ length: RUN_LIST_SHARDS }, (): string | null => '');

export const encodePositions = (positions: ShardPositions) => Buffer.from(JSON.stringify(positions)).toString('base64url');

/** @throws InvalidInput for a cursor no listing handed out (or one longer than `maxKeyLength` per shard) */
export function decodePositions(cursor: string | undefined, maxKeyLength: number): ShardPositions | undefined {
  if (cursor === undefined) return undefined;
  try {
    const positions = JSON.parse(Buffer.from(cursor, 'base64url').toString());
    const valid =
      Array.isArray(positions) &&
      positions.length === RUN_LIST_SHARDS &&
      positions.every((p) => p === null || (typeof p === 'string' && p.length <= maxKeyLength));
    if (valid) return positions;
  } catch {}
  throw new InvalidInput('after', 'not a cursor of this connection');
}
