/**
 * Stalled runs found: one watcher per table (whichever replica holds its system lease, like a
 * stream shard's reader) reads the claims that ran out from the stall index every
 * RUNPLANE_STALL_CHECK_SECONDS, and moves each RUNNING or WAITING_FOR_TOOL run whose claim it
 * still is to STALLED, with a `run.stalled` event. The step is conditioned on that very
 * claim, so however many watchers there are (one lease changing hands, say), a claim's expiry
 * makes one `run.stalled` at most. A run is found within its claim's TTL plus one interval
 * (plus the watcher lease's TTL when the replica holding it dies), however many of another
 * tenant's ran out before it: a round reads both ends of the index (READ_PER_END) and looks at
 * what it read in turns by tenant (stall-turns.ts), so a backlog takes a share of each round. An
 * expired claim of a run awaiting approval leaves the index until the run is approved (which
 * lists it again).
 */
import { heldByOther } from '../domain/lease.ts';
import { isTerminal, type RunClaim, type RunStatus, stallable } from '../domain/run.ts';
import { sleep } from '../lib/backoff.ts';
import type { Logger } from '../lib/logger.ts';
import type { RunStore } from '../store/index.ts';
import type { ShardLease, ShardLeases } from '../store/leases/shards.ts';
import { CLAIM_INDEX_SHARDS } from '../table/keys.ts';
import { inTurns } from './stall-turns.ts';

/** The watcher's lease row (`_sys#unit#stall-watcher`). */
const WATCHER_UNIT = 'stall-watcher';
/** Runs a round looks at once. */
export const CONCURRENT_RUNS = 16;
/** Runs looked at per round: this many per index shard (400), taken in turns by tenant; the rest wait for the next round. */
const PER_ROUND = 100;
/**
 * Expired claims read per index shard and round at each end of its range (the oldest, the
 * newest): at most 2 × 500 × 4 = 4,000 held in a round. Claims between the two ends, of a backlog
 * deeper than that, are read once the oldest have been looked at, or once they are the newest.
 */
const READ_PER_END = 500;

export interface StallWatcherOptions {
  runs: Pick<RunStore, 'stall' | 'expiredClaims' | 'unlistClaim' | 'unlistClaimWhile' | 'head'>;
  leases: ShardLeases;
  /** This replica's name in the lease row. */
  owner: string;
  intervalMs: number;
  log: Logger;
  now?: () => number;
  /** Runs looked at per index shard and round (default 100), taken in turns by tenant. */
  perRound?: number;
}

export class StallWatcher {
  private lease: ShardLease | null = null;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  readonly counts = { stalled: 0, rounds: 0 };

  constructor(private readonly options: StallWatcherOptions) {}

  /** Whether this replica watches now. */
  get watching() {
    return this.lease !== null;
  }

  start() {
    this.loop = (async () => {
      while (!this.stopping.signal.aborted) {
        // Rounds start an interval apart, however long one takes: a claim that ran out just after
        // a round looked is found one interval later, not one interval and a round (a round longer
        // than the interval, a backlog, is followed by the next at once).
        const next = performance.now() + this.options.intervalMs;
        try {
          if (await this.hold()) await this.round();
        } catch (err) {
          this.options.log.warn(`stall watcher: a round failed (${err instanceof Error ? err.message : String(err)})`);
        }
        await sleep(Math.max(0, next - performance.now()), this.stopping.signal);
      }
    })();
  }

  /** Takes or keeps the watcher's lease (three intervals long); whether this replica holds it. */
  private async hold() {
    const { leases, owner, intervalMs } = this.options;
    const ttlSeconds = Math.max(2, Math.ceil((3 * intervalMs) / 1000));
    if (this.lease) this.lease = await leases.hold({ lease: this.lease, ttlSeconds });
    if (!this.lease) {
      const row = await leases.read(WATCHER_UNIT);
      const now = (this.options.now ?? Date.now)();
      if (!heldByOther(row, owner, now)) this.lease = await leases.acquire(WATCHER_UNIT, owner, ttlSeconds, row);
    }
    return this.lease !== null;
  }

  /**
   * One look at the claims that ran out, CONCURRENT_RUNS runs at a time: claims that ran out
   * together (a worker holding many runs dies) are found in a few steps' time, not one after another.
   * In turns by tenant: one tenant's backlog delays another's claim by a turn, not by the backlog.
   */
  async round() {
    const { runs } = this.options;
    this.counts.rounds++;
    const now = (this.options.now ?? Date.now)();
    const perRound = this.options.perRound ?? PER_ROUND;
    const read = await runs.expiredClaims(now, Math.max(READ_PER_END, perRound));
    const expired = inTurns(read, perRound * CLAIM_INDEX_SHARDS);
    let next = 0;
    const lookingAt = async () => {
      for (let item = expired[next++]; item && !this.stopping.signal.aborted; item = expired[next++]) await this.lookAt(item);
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENT_RUNS, expired.length) }, lookingAt));
  }

  /** What an expired claim's run needs: its claim out of the index, or the run STALLED. */
  private async lookAt({ tenant, runId, claim }: { tenant: string; runId: string; claim: RunClaim }) {
    const { runs } = this.options;
    try {
      const head = await runs.head(tenant, runId);
      // A finished (or vanished) run's claim has nothing more to say: out of the index.
      const status = head?.meta.status as RunStatus | undefined;
      if (!status || isTerminal(status)) {
        await runs.unlistClaim(tenant, runId, claim);
        return;
      }
      // Awaiting approval, it cannot stall now (an approval lists the claim again). Left in the
      // index, such claims, oldest of all, would fill every round's page ahead of newer ones.
      if (!stallable.has(status)) {
        await runs.unlistClaimWhile(tenant, runId, claim, status);
        return;
      }
      if (await runs.stall(tenant, runId, claim)) this.counts.stalled++;
    } catch (err) {
      this.options.log.warn(`stall watcher: run ${runId} not looked at (${err instanceof Error ? err.message : String(err)})`);
    }
  }

  async stop() {
    this.stopping.abort();
    await this.loop;
    if (this.lease) await this.options.leases.hold({ lease: this.lease, ttlSeconds: 0 }).catch(() => null);
    this.lease = null;
  }
}
