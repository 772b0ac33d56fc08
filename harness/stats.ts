/** Percentiles and formatting for benchmark figures. */
export function percentile(samples: number[], p: number) {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

export const ms = (value: number) => `${value.toFixed(1)} ms`;
export const ratio = (value: number) => `${value.toFixed(2)}x`;
