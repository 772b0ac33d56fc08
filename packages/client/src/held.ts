/** What withLease and withRun share: waiting while another holds the thing, and running the function while holding it. */
import { RunplaneError } from './errors.ts';
import { sleep } from './retry.ts';
import { anySignal } from './signals.ts';

/** Renewals are sent every third of the TTL, so two can fail before it runs out. */
const RENEWALS_PER_TTL = 3;
/** The signal aborts this fraction of the TTL before it could run out: time for the function to stop writing. */
const SAFETY_FRACTION = 0.1;

/** Who holds it, until when (the refusal's fields). */
export interface Held {
  holder: string;
  expiresAt: string;
}

/** Polling something held (a unit, a run): from this delay, doubling, never past the cap (nor past its holder's expiry). */
const HELD_WAIT = { firstMs: 50, maxMs: 500 };

/**
 * How long to wait before asking again for something held until `expiresAt` (try `tries`,
 * from 0): jittered and growing, never past the expiry; undefined when the wait would end
 * after `giveUpAt`.
 */
function heldWait(tries: number, expiresAt: string, giveUpAt: number) {
  const untilExpiry = Date.parse(expiresAt) - Date.now();
  const delay = Math.max(10, Math.min(untilExpiry, Math.random() * Math.min(HELD_WAIT.maxMs, HELD_WAIT.firstMs * 2 ** tries)));
  return Date.now() + delay > giveUpAt ? undefined : delay;
}

/**
 * Runs `fn` while something is held, then stops holding it and releases it (also after a loss:
 * if it is still ours, a renewal was only slow, and it is free at once). A loss is what throws
 * (the function's own error as its cause); otherwise the function's outcome.
 */
export async function whileHeld<T>(
  held: { stop(): Promise<void>; readonly lost: RunplaneError | undefined },
  fn: () => Promise<T>,
  release: () => Promise<unknown>,
): Promise<T> {
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    outcome = { ok: true, value: await fn() };
  } catch (error) {
    outcome = { ok: false, error };
  }
  await held.stop();
  await release().catch(() => undefined);
  const { lost } = held;
  if (lost) throw new RunplaneError(lost.code, lost.message, { details: lost.details, cause: outcome.ok ? undefined : outcome.error });
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/**
 * Asks for it until it is granted: an answer that another holds it is asked again after a wait
 * (heldWait), until `waitMs` has passed; then `heldError` says who holds it.
 */
export async function askWhileHeld<T>(
  { waitMs = 0, signal }: { waitMs?: number; signal?: AbortSignal },
  ask: () => Promise<{ granted: T } | { held: Held }>,
  heldError: (held: Held) => RunplaneError,
): Promise<T> {
  const giveUpAt = Date.now() + waitMs;
  for (let tries = 0; ; tries++) {
    const answer = await ask();
    if ('granted' in answer) return answer.granted;
    const delay = heldWait(tries, answer.held.expiresAt, giveUpAt);
    if (delay === undefined) throw heldError(answer.held);
    await sleep(delay, signal);
  }
}

/** How it is lost: the error, and whether it ended on the server (then there is nothing to release). */
export interface Loss {
  error: RunplaneError;
  ended?: boolean;
}

/** Something held while renewed: `signal` aborts the moment it is lost. */
export interface Hold {
  readonly signal: AbortSignal;
  readonly lost: RunplaneError | undefined;
  readonly ended: boolean;
  finished(): void;
  stop(): Promise<void>;
}

export interface HoldOptions {
  ttlSeconds: number;
  /** The caller's own signal: aborting it aborts the holder's. */
  signal?: AbortSignal;
  /** Renews it once, within `call`'s signal and retry deadline: undefined when renewed, else the loss. */
  renew: (call: { signal: AbortSignal; retry: { deadlineMs: number } }) => Promise<Loss | undefined>;
  /** The error when no renewal got through before it would run out. */
  expired: () => RunplaneError;
  /** What else may end it, told through `lose` (a watched stream), until `stopping` aborts. */
  watch?: (lose: (loss: Loss) => void, stopping: AbortSignal) => Promise<void>;
}

/**
 * Keeps something held (a lease, a run's claim) from `sentAt`, when the request that took it
 * was sent: renewals in the background, and the signal that aborts the moment it is lost or
 * would run out before a renewal gets through.
 */
export function holdRenewed({ ttlSeconds, signal, renew, expired, watch }: HoldOptions, sentAt: number): Hold {
  const ttlMs = ttlSeconds * 1000;
  const aborter = new AbortController();
  const stopping = new AbortController();
  let lost: RunplaneError | undefined;
  let ended = false;
  let expiry: ReturnType<typeof setTimeout> | undefined;

  const lose = ({ error, ended: over = false }: Loss) => {
    if (lost || stopping.signal.aborted) return;
    lost = error;
    ended ||= over;
    clearTimeout(expiry);
    aborter.abort(error);
  };
  /** Known good until `from` (when the request that extended it was sent) plus the TTL, less the safety margin. */
  const confirmed = (from: number) => {
    clearTimeout(expiry);
    const abortAt = from + ttlMs * (1 - SAFETY_FRACTION);
    expiry = setTimeout(() => lose({ error: expired() }), Math.max(0, abortAt - Date.now()));
    return abortAt;
  };
  const onCallerAbort = () => aborter.abort(signal?.reason);
  signal?.addEventListener('abort', onCallerAbort, { once: true });

  const renewing = (async () => {
    let validUntil = confirmed(sentAt);
    while (!lost && !stopping.signal.aborted) {
      try {
        await sleep(ttlMs / RENEWALS_PER_TTL, stopping.signal);
        const renewalSentAt = Date.now();
        // Waiting past the point it may have run out is pointless: the signal has aborted by then.
        const until = AbortSignal.timeout(Math.max(1, validUntil - renewalSentAt));
        const loss = await renew({
          signal: anySignal([stopping.signal, until]),
          retry: { deadlineMs: Math.max(0, validUntil - renewalSentAt) },
        });
        if (loss) lose(loss);
        else validUntil = confirmed(renewalSentAt);
      } catch {
        // Stopped, or this renewal failed: the next one tries again, and the expiry timer decides.
      }
    }
  })();
  const watching = watch?.(lose, stopping.signal);

  return {
    signal: aborter.signal,
    get lost() {
      return lost;
    },
    /** It ended on the server (cancelled, taken over, finished): nothing to release. */
    get ended() {
      return ended;
    },
    /** The holder ended it itself (its run finished): renewals stop, nothing is lost, nothing is left to release. */
    finished() {
      if (lost) return;
      ended = true;
      stopping.abort();
      clearTimeout(expiry);
    },
    async stop() {
      stopping.abort();
      clearTimeout(expiry);
      signal?.removeEventListener('abort', onCallerAbort);
      await Promise.all([renewing, watching]);
    },
  };
}
