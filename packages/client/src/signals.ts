/**
 * A signal that aborts when any of the given ones does, with that one's reason:
 * `AbortSignal.any` where there is one (Node 20.3+, current browsers), the same by hand elsewhere.
 */
export function anySignal(signals: AbortSignal[]): AbortSignal {
  const native = (AbortSignal as { any?: (signals: AbortSignal[]) => AbortSignal }).any;
  if (native) return native.call(AbortSignal, signals);
  const combined = new AbortController();
  const aborted = signals.find((signal) => signal.aborted);
  if (aborted) {
    combined.abort(aborted.reason);
    return combined.signal;
  }
  const onAbort = (event: Event) => {
    for (const signal of signals) signal.removeEventListener('abort', onAbort);
    combined.abort((event.target as AbortSignal).reason);
  };
  for (const signal of signals) signal.addEventListener('abort', onAbort);
  return combined.signal;
}
