/**
 * An engine of the test's own, for tests that drive its fault injection and controls.
 * These only make sense against the embedded engine, so they are skipped when the suite
 * runs against another endpoint.
 */
import { inject } from 'vitest';
import { type Engine, type EngineOptions, startEngine } from '../../src/index.ts';
import { dynamoClient, streamsClient } from './aws.ts';

export const onlyEmbedded = !inject('embeddedEngine');

/** A clock the test moves by hand. */
export function manualClock(start = Date.now()) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

export async function ownEngine(options: EngineOptions = {}) {
  const engine: Engine = await startEngine(options);
  return {
    engine,
    client: dynamoClient({ endpoint: engine.endpoint, maxAttempts: 1 }),
    streams: streamsClient({ endpoint: engine.endpoint, maxAttempts: 1 }),
  };
}
