/**
 * How stream shards are spread over server replicas: each reads an even share, rounded up so
 * that every shard has a reader. No I/O: the replicas' shard ownership acts on these.
 */

/** The most shards one replica should hold (`replicas` undefined: unknown, so all of them). */
export function fairShare(shards: number, replicas: number | undefined) {
  if (replicas === undefined || replicas < 1) return shards;
  return Math.ceil(shards / replicas);
}

/** Whether a replica holding `held` shards may take one more. */
export const mayTake = (held: number, shards: number, replicas: number | undefined) => held < fairShare(shards, replicas);

/**
 * How many shards a replica hands back this round: one at a time while it holds more than its
 * share (a replica that joined takes them as they come free), none while the count is unknown.
 */
export function toHandBack(held: number, shards: number, replicas: number | undefined) {
  if (replicas === undefined) return 0;
  return held > fairShare(shards, replicas) ? 1 : 0;
}
