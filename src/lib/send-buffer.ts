/**
 * What one connection may hold for its subscribers: bytes of events queued in their feeds
 * plus bytes of frames written but not yet taken by the client. A client that stops reading
 * fills it; its feeds then stop queueing and read on from the table once it has drained
 * (the table is the buffer), so a slow or dead reader costs this bound and no more.
 */
/** A feed's own send buffer when its connection gives none (tests, in-process callers). */
export const DEFAULT_SEND_BUFFER_BYTES = 1024 * 1024;

export class SendBuffer {
  private held = 0;
  /** Made at the first wait: a release (one per frame sent) then checks a field, not a map, on a busy socket. */
  private roomWaiters: Map<() => void, number> | undefined;
  private readers = 0;
  /** A running estimate of an item's size, to read no more than there is room for. */
  private typical = 1024;
  private readonly readerQueue: Array<() => void> = [];

  /**
   * @param limit bytes held at most (one item is always let through when nothing is held,
   *   so an event larger than the buffer still reaches a client that reads)
   * @param concurrentReads table reads its feeds may have in flight at once: each holds up to
   *   a page (1 MB) until its events are queued or dropped
   */
  constructor(
    readonly limit: number,
    /** Where every send buffer of the process adds what it holds (for /metrics). */
    private readonly totals: { held: number } = { held: 0 },
    private readonly concurrentReads = 2,
  ) {}

  get bytes() {
    return this.held;
  }

  get full() {
    return this.held >= this.limit;
  }

  /** Holds `bytes` if they fit; false (nothing held) if they do not. */
  tryHold(bytes: number): boolean {
    if (!this.admits(bytes)) return false;
    this.hold(bytes);
    return true;
  }

  /** Whether an item of `bytes` would be let in now, counted among the items seen (tryHold without the hold). */
  admits(bytes: number): boolean {
    this.typical = 0.8 * this.typical + 0.2 * bytes;
    return this.fits(bytes);
  }

  /** How many items to read now: as many as there is room for, judging by the items seen so far (at least 1, at most `most`). */
  itemsWithRoom(most: number) {
    return Math.max(1, Math.min(most, Math.floor((this.limit - this.held) / this.typical)));
  }

  /** Holds `bytes` whatever the room (a frame already built and being written). */
  hold(bytes: number) {
    this.held += bytes;
    this.totals.held += bytes;
  }

  release(bytes: number) {
    const released = Math.min(bytes, this.held);
    this.held -= released;
    this.totals.held -= released;
    // Twice per frame on a busy socket: no iterator when nobody waits.
    const waiters = this.roomWaiters;
    if (waiters === undefined || waiters.size === 0) return;
    for (const [wake, wanted] of waiters) {
      if (!this.fits(wanted)) continue;
      waiters.delete(wake);
      wake();
    }
  }

  /** Whether `bytes` would be let in now. */
  fits(bytes: number) {
    return this.held === 0 || this.held + bytes <= this.limit;
  }

  /**
   * Calls `then` once `bytes` fit (soon, never from inside this call, if they fit now).
   * @returns a function that cancels the wait
   */
  whenRoom(bytes: number, then: () => void): () => void {
    if (this.fits(bytes)) {
      let cancelled = false;
      queueMicrotask(() => cancelled || then());
      return () => {
        cancelled = true;
      };
    }
    this.roomWaiters ??= new Map();
    const waiters = this.roomWaiters;
    waiters.set(then, bytes);
    return () => waiters.delete(then);
  }

  /** Runs a table read when fewer than `concurrentReads` of this connection's are in flight. */
  async read<T>(run: () => Promise<T>): Promise<T> {
    if (this.readers >= this.concurrentReads) await new Promise<void>((resolve) => this.readerQueue.push(resolve));
    else this.readers++;
    try {
      return await run();
    } finally {
      const next = this.readerQueue.shift();
      if (next) next();
      else this.readers--;
    }
  }
}
