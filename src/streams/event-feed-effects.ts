/**
 * What passes between the event feed's state machine (event-feed-states.ts) and its driver
 * (event-feed.ts): the machine's states, and the effects each input asks the driver for.
 *
 * Each input returns its effects as bits (`Effect`), with their arguments on the machine
 * (`next`, `range`, `delayMs`, `error`): no allocation per event beyond what is handed out.
 * Handing out is the one synchronous output: `out.push` takes the event or refuses it.
 */

/**
 * - starting: a live-only feed asking where the run ends; live events are kept meanwhile.
 * - reading: a table read is in flight (catching up from afterSeq, filling a hole, reading on
 *   after a lag, or looking again for stepped-over seqs); live events at `next` are still
 *   handed out, others kept.
 * - retrying: the table could not be read; pausing before reading again.
 * - live: at the end of the table; each live event is handed out as it comes.
 * - waiting: a hole before something known (in the table or among live events); the table is
 *   looked at again when the look timer fires, and the hole is stepped over after `gapWaitMs`.
 * - behind: the consumer cannot take more (its queue or its connection's send buffer is full);
 *   nothing is kept, the table holds it all; reading on once the consumer drains.
 * - ended: the consumer stopped, or the start failed.
 */
export type FeedState = 'starting' | 'reading' | 'retrying' | 'live' | 'waiting' | 'behind' | 'ended';

/** What the driver is to do after an input; bits, so one input can ask for several. */
export const Effect = {
  NONE: 0,
  /** Ask the table for the run's last seq; answer `found` or `failed`. */
  FIND_END: 1,
  /** Read a page from `next` on, unless the send buffer is full; answer `page`, `full` or `failed`. */
  READ: 2,
  /** Read the stepped-over seqs of `range`; answer `rechecked` or `failed`. */
  RECHECK: 4,
  /** Start the look timer for `delayMs`; answer `look`. */
  LOOK: 8,
  /** Stop the look timer. */
  CANCEL_LOOK: 16,
  /** Pause `delayMs` after a failed read; answer `retry`. */
  PAUSE: 32,
  /** Tell the consumer's queue that nothing comes until it drains; answered by `drained`. */
  STALL: 64,
  /** Report `error` (the feed goes on). */
  REPORT: 128,
  /** End the consumer's stream with `error`. */
  FAIL: 256,
  /** The feed fell behind (one more lagging feed). */
  BEHIND: 512,
  /** The feed is no longer behind. */
  CAUGHT_UP: 1024,
  /** The feed is over: let go of the hub and the timers. */
  END: 2048,
} as const;
