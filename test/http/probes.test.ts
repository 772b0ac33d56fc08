/** /health says the process serves; /ready says DynamoDB answers, and follows it down and back up. */

import { startEngine } from '@runplane/engine';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

let engine: Awaited<ReturnType<typeof ownEngine>>['engine'];
let api: TestServer;
beforeAll(async () => {
  if (onlyEmbedded) return;
  ({ engine } = await ownEngine());
  api = await startTestServer({ endpoint: engine.endpoint });
});
afterAll(() => engine?.close());

const probe = async (path: string) => {
  const response = await fetch(new URL(path, api.url));
  return { status: response.status, body: (await response.json()) as { status: string; reason?: string } };
};

describe.skipIf(onlyEmbedded)('health and readiness', () => {
  test('both answer 200 while DynamoDB answers', async () => {
    expect(await probe('/health')).toEqual({ status: 200, body: { status: 'alive' } });
    expect(await probe('/ready')).toEqual({ status: 200, body: { status: 'ready' } });
  });

  test('DynamoDB failing: not ready (503, with the reason), still alive; ready again once it answers', async () => {
    const fault = engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError' });
    await waitFor(async () => (await probe('/ready')).status === 503, { what: '/ready to fail' });
    expect((await probe('/ready')).body).toMatchObject({ status: 'unavailable', reason: expect.stringMatching(/DynamoDB did not answer/) });
    expect((await probe('/health')).status).toBe(200);
    fault.remove();
    await waitFor(async () => (await probe('/ready')).status === 200, { what: '/ready to recover' });
  });

  test('DynamoDB unreachable, then back on the same port without the table: each reason told', async () => {
    const port = Number(new URL(engine.endpoint).port);
    await engine.close();
    await waitFor(async () => (await probe('/ready')).status === 503, { what: '/ready to fail', timeoutMs: 10_000 });
    expect((await probe('/health')).status).toBe(200);
    engine = await startEngine({ port });
    await waitFor(async () => /does not exist/.test((await probe('/ready')).body.reason ?? ''), {
      what: 'the missing table',
      timeoutMs: 10_000,
    });
  });
});
