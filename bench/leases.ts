/**
 * Leases: workers contending for a few units, each taking a unit, releasing it at once,
 * and trying again. Beside it, the same contention on the raw SDK: a conditional PutItem
 * (free or expired) and a conditional DeleteItem, on the same engine.
 */
import { randomBytes } from 'node:crypto';
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, graphqlClient } from './clients.ts';
import type { ServerProcess } from './server.ts';

export interface LeaseResult {
  workers: number;
  units: number;
  acquisitionsPerSecond: number;
  refusalsPerSecond: number;
}

const ACQUIRE = `mutation($input: AcquireLeaseInput!) {
  acquireLease(input: $input) { __typename ... on Lease { token } }
}`;
const RELEASE = 'mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) { __typename } }';

async function contend(workers: number, units: number, durationMs: number, attempt: (worker: number, unit: number) => Promise<boolean>) {
  let acquired = 0;
  let refused = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < deadline) {
        if (await attempt(worker, Math.floor(Math.random() * units))) acquired++;
        else refused++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { workers, units, acquisitionsPerSecond: acquired / seconds, refusalsPerSecond: refused / seconds };
}

export async function leaseContention(server: ServerProcess, workers: number, units: number, durationMs: number) {
  const gql = graphqlClient(server.url);
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const api = await contend(workers, units, durationMs, async (worker, unit) => {
    const unitId = `${prefix}-${unit}`;
    const owner = `worker-${worker}`;
    const { acquireLease } = (await gql(ACQUIRE, { input: { unitId, owner, ttlSeconds: 30 } })) as {
      acquireLease: { __typename: string; token?: number };
    };
    if (acquireLease.__typename !== 'Lease') return false;
    await gql(RELEASE, { input: { unitId, owner, token: acquireLease.token } });
    return true;
  });

  const dynamo = documentClient(server.engineEndpoint);
  const raw = await contend(workers, units, durationMs, async (worker, unit) => {
    const pk = `${prefix}#raw#${unit}`;
    const now = Math.floor(Date.now() / 1000);
    try {
      await dynamo.send(
        new PutCommand({
          TableName: 'runplane',
          Item: { pk, sk: 'lease', owner: `worker-${worker}`, expiresAt: now + 30 },
          ConditionExpression: 'attribute_not_exists(pk) OR expiresAt <= :now',
          ExpressionAttributeValues: { ':now': now },
        }),
      );
    } catch (err) {
      if ((err as Error).name === 'ConditionalCheckFailedException') return false;
      throw err;
    }
    await dynamo.send(new DeleteCommand({ TableName: 'runplane', Key: { pk, sk: 'lease' } }));
    return true;
  });
  dynamo.destroy();
  return { api, raw };
}
