/**
 * The clients' configuration where it departs from the SDK's defaults: requests to the engine
 * in this process carry no User-Agent (nobody reads it; the SDK builds it anew for each request),
 * and requests over the network keep it. The name checked is the SDK's own: if a release renames
 * the step, the network clients' check fails.
 */
import { describe, expect, test } from 'vitest';
import { createClients, USER_AGENT_MIDDLEWARE } from '../../src/table/client.ts';

const connection = { region: 'us-east-1', credentials: { accessKeyId: 't', secretAccessKey: 't' }, endpoint: 'http://127.0.0.1:1' };
const steps = (client: { middlewareStack: { identify(): string[] } }) =>
  client.middlewareStack.identify().map((entry) => entry.split(' ')[0]);

describe('the User-Agent step', () => {
  test('kept on clients that send over the network, left out in process', () => {
    const network = createClients(connection);
    const inProcess = createClients({ ...connection, inProcess: async () => ({ status: 200, body: '{}' }) });
    try {
      for (const name of ['dynamo', 'cached', 'streams', 'pollerStreams'] as const) {
        expect(steps(network[name]), name).toContain(USER_AGENT_MIDDLEWARE);
        expect(steps(inProcess[name]), name).not.toContain(USER_AGENT_MIDDLEWARE);
      }
    } finally {
      network.destroy();
      inProcess.destroy();
    }
  });
});
