/**
 * Fencing tokens against TTL: a lease row's tokens may run ahead of the clock (many acquires
 * a second), and TTL must not delete the row before the clock's floor has passed them, or
 * the next row would start below a token already given out. Driven on the store with a
 * clock the test moves; the row's deletion is done as TTL would do it, once it is due.
 */
import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { TOKEN_EPOCH_MS } from '../../src/domain/limits.ts';
import { createStores } from '../../src/store/index.ts';
import { type Clients, createClients } from '../../src/table/client.ts';
import { ensureTable } from '../../src/table/ensure.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { onEveryCommand } from '../support/commands.ts';

let clients: Clients;
const table = uniqueName('leases');
let clock = Date.now();
let updates = 0;
const retention = { idempotencySeconds: 3600, finishedRunSeconds: 86400, leaseSeconds: 60 };
let leases: ReturnType<typeof createStores>['leases'];

beforeAll(async () => {
  clients = createClients({
    endpoint: inject('dynamodbEndpoint'),
    region: 'us-east-1',
    credentials: { accessKeyId: 't', secretAccessKey: 't' },
  });
  onEveryCommand(clients, (name) => {
    if (name === 'UpdateItemCommand') updates++;
  });
  await ensureTable(clients.dynamo, table, { create: true });
  ({ leases } = createStores({ doc: clients.doc, tableName: table, now: () => new Date(clock), retention }));
});
afterAll(() => clients.destroy());

/** The row's TTL attribute, in epoch seconds. */
async function rowExpiry(unitId: string) {
  const { Item } = await clients.doc.send(new GetCommand({ TableName: table, Key: keys.lease('t', unitId), ConsistentRead: true }));
  return Number(Item?.expiresAt);
}
const floorAt = (ms: number) => Math.floor((ms - TOKEN_EPOCH_MS) / 1000);

describe('fencing tokens and TTL', () => {
  test('tokens far ahead of the clock keep their row until the clock passes them; the next row starts above them', async () => {
    const unitId = uniqueName('unit');
    let token = 0;
    // 300 acquires within one second: the token runs 300 ahead of the floor, past the lease's TTL (1 s + 60 s).
    for (let i = 0; i < 300; i++) token = (await leases.acquire({ tenant: 't', unitId, owner: 'a', ttlSeconds: 1 })).token;
    expect(token - floorAt(clock)).toBeGreaterThan(61);
    const released = await leases.release({ tenant: 't', unitId, owner: 'a', token });
    expect(released.token).toBe(token);
    const expiry = await rowExpiry(unitId);
    // TTL may delete the row from `expiry` on: by then the floor must be past the token.
    expect(floorAt(expiry * 1000)).toBeGreaterThan(token);
    clock = expiry * 1000;
    await clients.doc.send(new DeleteCommand({ TableName: table, Key: keys.lease('t', unitId) }));
    const next = await leases.acquire({ tenant: 't', unitId, owner: 'b', ttlSeconds: 1 });
    expect(next.token).toBeGreaterThan(token);
  });

  test('a renewed lease keeps its row as long as its token needs', async () => {
    const unitId = uniqueName('unit');
    let token = 0;
    for (let i = 0; i < 100; i++) token = (await leases.acquire({ tenant: 't', unitId, owner: 'a', ttlSeconds: 1 })).token;
    await leases.renew({ tenant: 't', unitId, owner: 'a', token, ttlSeconds: 1 });
    expect(floorAt((await rowExpiry(unitId)) * 1000)).toBeGreaterThan(token);
  });

  test('an acquire is one write, whether the unit is taken again at once or seconds later', async () => {
    const unitId = uniqueName('unit');
    await leases.acquire({ tenant: 't', unitId, owner: 'a', ttlSeconds: 1 });
    updates = 0;
    for (let i = 0; i < 5; i++) await leases.acquire({ tenant: 't', unitId, owner: 'a', ttlSeconds: 1 });
    expect(updates).toBe(5);
    updates = 0;
    for (let i = 0; i < 5; i++) {
      clock += 5_000;
      await leases.acquire({ tenant: 't', unitId, owner: 'a', ttlSeconds: 1 });
    }
    expect(updates).toBe(5);
  });
});
