/**
 * Who this replica expects to hear from: every replica sends a heartbeat through Redis each
 * second, saying how many stream shards it reads. One that reads shards and goes quiet past
 * the bound (it cannot write to Redis, or this replica cannot read what it writes) means this
 * replica is missing changes: it is degraded, and fills its subscribers from the table until
 * the beats come again. One quiet for longer than a shard lease is gone (its shards were taken
 * over by replicas that beat), and is forgotten.
 */

/** Replicas remembered at most. */
const MAX_SENDERS = 1024;

export interface HeartbeatOptions {
  /** A shard reader unheard for longer than this makes this replica degraded. */
  boundMs: number;
  /** A replica unheard for longer than this is forgotten. */
  forgetMs: number;
  now?: () => number;
}

export class Heartbeats {
  /** Shard readers, by when they were last heard. */
  private readonly heard = new Map<string, { at: number; shards: number }>();
  /** Every replica heard, by when (a beat is sealed: only a replica of this table can beat). */
  private readonly seen = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly options: HeartbeatOptions) {
    this.now = options.now ?? Date.now;
  }

  /** A beat from `from`, which reads `shards` shards; a leaving replica's last beat forgets it at once. */
  beat(from: string, shards: number, leaving = false) {
    this.heard.delete(from);
    this.seen.delete(from);
    if (leaving) return;
    this.seen.set(from, this.now());
    if (this.seen.size > MAX_SENDERS) this.seen.delete(this.seen.keys().next().value as string);
    if (shards <= 0) return;
    this.heard.set(from, { at: this.now(), shards });
    if (this.heard.size > MAX_SENDERS) this.heard.delete(this.heard.keys().next().value as string);
  }

  /** The other replicas heard within `withinMs`. */
  alive(withinMs: number): string[] {
    const now = this.now();
    const ids: string[] = [];
    for (const [from, at] of this.seen) {
      if (at >= now - withinMs) ids.push(from);
      else if (at < now - this.options.forgetMs) this.seen.delete(from);
    }
    return ids;
  }

  /** The shard readers unheard past the bound (and not yet forgotten). */
  silent(): string[] {
    const at = this.now();
    const quiet: string[] = [];
    for (const [from, last] of this.heard) {
      const age = at - last.at;
      if (age > this.options.forgetMs) this.heard.delete(from);
      else if (age > this.options.boundMs) quiet.push(from);
    }
    return quiet;
  }
}

/** What a heartbeat says: the shards its sender reads (0 for anything else), and whether it is leaving. */
export function beatOf(value: string): [shards: number, leaving: boolean] {
  try {
    const { shards, leaving } = JSON.parse(value) as { shards?: unknown; leaving?: unknown };
    return [typeof shards === 'number' && Number.isInteger(shards) && shards >= 0 ? shards : 0, leaving === true];
  } catch {
    return [0, false];
  }
}
