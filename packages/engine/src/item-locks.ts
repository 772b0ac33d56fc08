/**
 * Per-item locks with a bound on waiting. Every write (single or transactional) and every
 * TransactGetItems takes the locks of the items it touches. A request that cannot get them
 * within `waitMs` gives up with LockConflict, which the caller answers as DynamoDB answers
 * contention: TransactionConflict. Nothing waits forever behind a stalled holder.
 */

/** How many requests may wait for one item; one more gets LockConflict at once (DynamoDB would not queue it at all). */
export const MAX_WAITERS_PER_ITEM = 1_000;

export class LockConflict extends Error {
  constructor(readonly key: string) {
    super(`gave up waiting for the lock of ${key}`);
  }
}

export interface LockOptions {
  /** How long a request waits for its locks in all; Infinity waits as long as it takes (deterministic tests). */
  waitMs: number;
  maxWaitersPerItem?: number;
}

interface Waiter {
  grant(): void;
}

/** The lock id of an item: its table and dynalite's key string. */
export const lockId = (table: string, itemKey: string) => `${table}\u0000${itemKey}`;

export class ItemLocks {
  /** Held locks and who waits for them, first come first served; an item is absent when free. */
  private readonly queues = new Map<string, Waiter[]>();
  private conflicts = 0;
  private readonly maxWaiters: number;

  constructor(private readonly options: LockOptions) {
    this.maxWaiters = options.maxWaitersPerItem ?? MAX_WAITERS_PER_ITEM;
  }

  /**
   * Takes every lock, in key order so that two requests never wait for each other in a
   * circle; all or none. Resolves to the release.
   * @throws LockConflict when a lock was not granted in time or too many wait for it
   */
  async acquire(keys: string[]): Promise<() => void> {
    const deadline = performance.now() + this.options.waitMs;
    const taken: string[] = [];
    try {
      for (const key of [...new Set(keys)].sort()) {
        await this.take(key, deadline);
        taken.push(key);
      }
    } catch (err) {
      for (const key of taken) this.release(key);
      throw err;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const key of taken) this.release(key);
    };
  }

  stats() {
    let waiting = 0;
    for (const queue of this.queues.values()) waiting += queue.length;
    return { held: this.queues.size, waiting, conflicts: this.conflicts };
  }

  private take(key: string, deadline: number): Promise<void> | undefined {
    const queue = this.queues.get(key);
    if (!queue) {
      this.queues.set(key, []);
      return undefined;
    }
    const remaining = deadline - performance.now();
    // Over the bound of waiters, or out of time already: give up at once.
    if (queue.length >= this.maxWaiters || remaining <= 0) return Promise.reject(this.conflict(key));
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter: Waiter = {
        grant() {
          clearTimeout(timer);
          resolve();
        },
      };
      queue.push(waiter);
      if (!Number.isFinite(remaining)) return;
      timer = setTimeout(() => {
        // After a stall of the whole process, let the I/O that completed meanwhile run first:
        // the holder may be about to hand the lock over.
        setImmediate(() => {
          const at = queue.indexOf(waiter);
          if (at < 0) return;
          queue.splice(at, 1);
          reject(this.conflict(key));
        });
      }, remaining);
    });
  }

  private conflict(key: string) {
    this.conflicts++;
    return new LockConflict(key);
  }

  private release(key: string) {
    const queue = this.queues.get(key);
    if (!queue) return;
    const next = queue.shift();
    if (next) next.grant();
    else this.queues.delete(key);
  }
}
