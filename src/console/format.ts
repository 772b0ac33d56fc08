/** How times, ages and amounts are shown. */

/** "3 s", "5 min", "2 h", "4 d": how long ago (or from now, for a negative span). */
export function span(ms: number) {
  const s = Math.max(0, Math.round(Math.abs(ms) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

export const age = (iso: string, now = Date.now()) => `${span(now - Date.parse(iso))} ago`;

/** Time to expiry, to the second: "1:04:05", "4:05", "0:09"; "expired" once past. */
export function countdown(iso: string, now = Date.now()) {
  const left = Math.ceil((Date.parse(iso) - now) / 1000);
  if (left <= 0) return 'expired';
  const h = Math.floor(left / 3600);
  const m = Math.floor((left % 3600) / 60);
  const s = String(left % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

export const time = (iso: string) => new Date(iso).toLocaleString(undefined, { hour12: false });

export const json = (value: unknown) => JSON.stringify(value, null, 2);

/** One line of a payload, for a row. */
export function preview(value: unknown, max = 120) {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
