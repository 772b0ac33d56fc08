/** Background upkeep, one pass of each task at a time: stream rollover and trimming, TTL sweeps, token pruning. */
import type { Settings } from './options.ts';

const MINUTE = 60_000;

interface Tasks {
  log: { tick(): Promise<unknown> };
  ttl: { sweep(): Promise<unknown>; intervalMs: number };
  transactions: { pruneTokens(): Promise<unknown> };
}

export function startUpkeep(settings: Settings, { log, ttl, transactions }: Tasks) {
  const { retentionMs, shardMaxAgeMs } = settings.stream;
  /** Runs `task` every `ms`; a pass still running when the next is due makes that one skip. */
  function every(ms: number, task: () => Promise<unknown>) {
    let running: Promise<unknown> | undefined;
    const timer = setInterval(() => {
      if (running) return;
      running = task()
        .catch(settings.onError)
        .finally(() => {
          running = undefined;
        });
    }, ms);
    timer.unref();
    return { stop: () => clearInterval(timer), idle: () => running ?? Promise.resolve() };
  }
  const timers = [
    every(Math.max(10, Math.min(MINUTE, retentionMs / 4, shardMaxAgeMs / 4)), () => log.tick()),
    every(ttl.intervalMs, () => ttl.sweep()),
    every(MINUTE, () => transactions.pruneTokens()),
  ];
  return {
    /** Stops the timers and waits for passes still running. */
    async stop() {
      for (const timer of timers) timer.stop();
      await Promise.allSettled(timers.map((t) => t.idle()));
    },
  };
}
