/**
 * The order a stall round looks at expired claims in: in turns by tenant, so one tenant's backlog
 * takes one place per turn, not every place ahead of another tenant's claim. No I/O.
 */

/**
 * At most `places` of `oldestFirst`, in turns: each tenant's oldest, then each one's second, and
 * so on; within a turn, tenants by their oldest claim. Another tenant's claim is in the first turn
 * however many of one tenant's ran out before it; and while fewer than `places` tenants have
 * claims in the read, each gets a place every round (a backlog progresses, at its share).
 */
export function inTurns<T extends { tenant: string }>(oldestFirst: readonly T[], places: number): T[] {
  const byTenant = new Map<string, T[]>();
  for (const item of oldestFirst) {
    const own = byTenant.get(item.tenant);
    if (own) own.push(item);
    else byTenant.set(item.tenant, [item]);
  }
  // A Map keeps its keys in insertion order: tenants by their oldest claim.
  let queues = [...byTenant.values()];
  const turns: T[] = [];
  for (let turn = 0; queues.length > 0 && turns.length < places; turn++) {
    for (const queue of queues) {
      if (turns.length === places) break;
      turns.push(queue[turn] as T);
    }
    queues = queues.filter((queue) => queue.length > turn + 1);
  }
  return turns;
}
