/**
 * RUNPLANE_ENGINE_PARTITION_LIMITS turns the embedded engine's throughput model on, with
 * the limits of RUNPLANE_ENGINE_PARTITION_WCU and _RCU: a partition past them is throttled
 * as DynamoDB throttles it, another is not.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { createTestTable, dynamoClient, uniqueName } from '../support/aws.ts';

let server: RunningServer;
beforeAll(async () => {
  server = await startServer(
    loadConfig({
      PORT: '0',
      RUNPLANE_IN_MEMORY: 'true',
      // Its port: the test's client reaches the engine over HTTP.
      RUNPLANE_ENGINE_PORT: '0',
      RUNPLANE_GRAPHIQL: 'false',
      RUNPLANE_ENGINE_PARTITION_LIMITS: 'true',
      // One write a second.
      RUNPLANE_ENGINE_PARTITION_WCU: '1',
    }),
    { log: silentLogger },
  );
});
afterAll(() => server.stop());

test('the embedded engine throttles a partition past RUNPLANE_ENGINE_PARTITION_WCU, and only that partition', async () => {
  const endpoint = server.engine?.endpoint;
  // Without it the client would fall back to the test run's engine, which has no limits.
  expect(endpoint).toBeDefined();
  const client = dynamoClient({ endpoint, maxAttempts: 1 });
  const { name } = await createTestTable(client, { stream: false });
  const hot = uniqueName('hot');
  // Twenty at once against one write a second: however slow the machine, they cannot all fit.
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: hot }, sk: { S: `s${i}` } } })).then(
        () => 'ok',
        (err: Error) => err.name,
      ),
    ),
  );
  expect(outcomes).toContain('ThrottlingException');
  await client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: uniqueName('cold') }, sk: { S: 's' } } }));
  expect(server.engine?.stats().throughput).toBeDefined();
});
