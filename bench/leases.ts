/**
 * Leases: workers contending for a few units, each taking a unit, releasing it at once,
 * and trying again. Beside it, the same contention on the raw SDK: a conditional PutItem
 * (free or expired) and a conditional DeleteItem, on the same engine.
 */
import { randomBytes } from 'node:crypto';
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient, graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';

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

interface Tally {
  acquired: number;
  refused: number;
  seconds: number;
}

async function contend(workers: number, units: number, durationMs: number, attempt: (worker: number, unit: number) => Promise<boolean>) {
  const tally: Tally = { acquired: 0, refused: 0, seconds: 0 };
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < deadline) {
        if (await attempt(worker, Math.floor(Math.random() * units))) tally.acquired++;
        else tally.refused++;
      }
    }),
  );
  tally.seconds = (performance.now() - started) / 1000;
  return tally;
}

function rates(tallies: Tally[], workers: number, units: number): LeaseResult {
  const seconds = tallies.reduce((n, t) => n + t.seconds, 0);
  return {
    workers,
    units,
    acquisitionsPerSecond: tallies.reduce((n, t) => n + t.acquired, 0) / seconds,
    refusalsPerSecond: tallies.reduce((n, t) => n + t.refused, 0) / seconds,
  };
}

export async function leaseContention(server: ServerProcess, workers: number, units: number, durationMs: number, rounds = 4) {
  const gql = graphqlClient(server.url);
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const throughApi = async (worker: number, unit: number) => {
    const unitId = `${prefix}-${unit}`;
    const owner = `worker-${worker}`;
    const { acquireLease } = (await gql(ACQUIRE, { input: { unitId, owner, ttlSeconds: 30 } })) as {
      acquireLease: { __typename: string; token?: number };
    };
    if (acquireLease.__typename !== 'Lease') return false;
    await gql(RELEASE, { input: { unitId, owner, token: acquireLease.token } });
    return true;
  };

  const dynamo = documentClient(server.engineEndpoint);
  const raw = async (worker: number, unit: number) => {
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
  };
  // Alternating rounds (and which goes first): both meet the same moments of this shared machine.
  const tallies: { api: Tally[]; raw: Tally[] } = { api: [], raw: [] };
  for (let round = 0; round < rounds; round++) {
    const slice = durationMs / rounds;
    const api = () => contend(workers, units, slice, throughApi).then((t) => tallies.api.push(t));
    const direct = () => contend(workers, units, slice, raw).then((t) => tallies.raw.push(t));
    if (round % 2 === 0) await api().then(direct);
    else await direct().then(api);
  }
  dynamo.destroy();
  return { api: rates(tallies.api, workers, units), raw: rates(tallies.raw, workers, units) };
}
