/** How shards are spread over replicas, as given/when/then tables. */
import { expect, test } from 'vitest';
import { fairShare, mayTake, toHandBack } from '../../src/domain/shard-share.ts';

test.each([
  // shards, replicas, share
  [1, 3, 1],
  [3, 2, 2],
  [4, 2, 2],
  [5, 3, 2],
  [0, 3, 0],
  [4, undefined, 4],
])('%i shards over %s replicas: at most %i each', (shards, replicas, share) => {
  expect(fairShare(shards, replicas)).toBe(share);
});

test.each([
  // held, shards, replicas, may take, hands back
  [0, 1, 3, true, 0],
  [1, 1, 3, false, 0],
  [3, 3, 1, false, 0],
  // A second replica joined: the first hands one back per round until it holds its share.
  [3, 3, 2, false, 1],
  [2, 3, 2, false, 0],
  [1, 3, 2, true, 0],
  // The count is unknown (Redis unreachable): take any free shard, hand none back.
  [3, 3, undefined, false, 0],
  [0, 3, undefined, true, 0],
])('holding %i of %i shards with %s replicas: may take %s, hands back %i', (held, shards, replicas, take, back) => {
  expect(mayTake(held, shards, replicas)).toBe(take);
  expect(toHandBack(held, shards, replicas)).toBe(back);
});
