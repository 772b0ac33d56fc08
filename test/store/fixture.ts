/**
 * Stores on a fresh table of the test run's engine (or one the test started), over real HTTP,
 * with a clock the test moves by hand and the DynamoDB commands they sent, by name.
 */
import { afterAll, inject } from 'vitest';
import type { Logger } from '../../src/lib/logger.ts';
import { createStores, type Retention } from '../../src/store/index.ts';
import { ThrottleCounts, type ThrottleRetry } from '../../src/store/throttles.ts';
import { createClients } from '../../src/table/client.ts';
import { ensureTable } from '../../src/table/ensure.ts';
import { uniqueName } from '../support/aws.ts';
import { onEveryCommand } from '../support/commands.ts';
import { manualClock } from '../support/engine.ts';

export const TENANT = 't';

export interface FixtureOptions {
  /** Another endpoint (an engine of the test's own, for its faults). */
  endpoint?: string;
  retention?: Partial<Retention>;
  groupCommit?: boolean;
  log?: Logger;
  /** 1: no SDK retries, so an injected failure reaches the store. */
  maxAttempts?: number;
  /** How throttled writes are tried again (tests shorten the waits). */
  throttleRetry?: ThrottleRetry;
}

export async function storesOnFreshTable(options: FixtureOptions = {}) {
  const clients = createClients({
    endpoint: options.endpoint ?? inject('dynamodbEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 't', secretAccessKey: 't' },
    maxAttempts: options.maxAttempts,
  });
  afterAll(() => clients.destroy());
  const commands: string[] = [];
  onEveryCommand(clients, (name) => commands.push(name));
  const table = uniqueName('store');
  await ensureTable(clients.dynamo, table, { create: true });
  const clock = manualClock();
  const throttles = new ThrottleCounts();
  const stores = createStores({
    doc: clients.doc,
    tableName: table,
    now: () => new Date(clock.now()),
    retention: { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 86400, ...options.retention },
    groupCommit: options.groupCommit,
    log: options.log,
    throttles,
    throttleRetry: options.throttleRetry,
  });
  /** Commands sent while `work` ran, by name. */
  const sentDuring = async (work: () => Promise<unknown>) => {
    const from = commands.length;
    await work();
    return commands.slice(from);
  };
  return { stores, clients, table, clock, sentDuring, throttles };
}

/** Creates a run with a fresh id through the store and returns the id. */
export async function newStoredRun(stores: ReturnType<typeof createStores>, budgetCap = 1000, eventShards = 1) {
  const id = uniqueName('run');
  await stores.runs.create({ tenant: TENANT, id, task: 't', budgetCap, eventShards });
  return id;
}
