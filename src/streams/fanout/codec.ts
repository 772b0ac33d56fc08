/** Changes as they travel between replicas: JSON, with dates as ISO strings read back into dates. */
import type { Change } from '../changes.ts';

export const encodeChange = (change: Change) => JSON.stringify(change);

const KINDS = new Set(['event', 'run', 'budget', 'lease', 'claim', 'output']);

/** @throws on anything that is not a change this version wrote (a foreign or garbled entry) */
export function decodeChange(text: string): Change {
  const value = JSON.parse(text) as Record<string, unknown>;
  if (!value || typeof value !== 'object' || !KINDS.has(value.kind as string) || typeof value.tenant !== 'string') {
    throw new Error('not a change');
  }
  const dates = (o: unknown, ...names: string[]) => {
    if (!o || typeof o !== 'object') throw new Error(`a ${String(value.kind)} change without its ${String(value.kind)}`);
    const record = o as Record<string, unknown>;
    for (const name of names) {
      const at = new Date(record[name] as string);
      if (Number.isNaN(at.getTime())) throw new Error(`${name} is not a date`);
      record[name] = at;
    }
  };
  switch (value.kind) {
    case 'event':
      dates(value.event, 'createdAt');
      break;
    case 'run': {
      dates(value.run, 'createdAt', 'updatedAt');
      // From a replica that predates event shards: the seed's layout.
      const run = value.run as { eventShards?: unknown };
      if (typeof run.eventShards !== 'number') run.eventShards = 1;
      break;
    }
    case 'budget':
      dates(value.budget);
      break;
    case 'lease':
      dates(value.lease, 'acquiredAt', 'expiresAt');
      break;
    case 'claim':
      dates(value.claim, 'acquiredAt', 'expiresAt');
      break;
    case 'output': {
      const chunk = value.chunk as Record<string, unknown> | null;
      if (!chunk || typeof chunk.text !== 'string' || !Number.isSafeInteger(chunk.offset) || typeof chunk.stream !== 'string')
        throw new Error('an output change without its chunk');
      break;
    }
  }
  return value as unknown as Change;
}
