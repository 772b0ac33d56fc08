/**
 * A table's description and its stream's definition are written together: whatever moment
 * the engine is killed at, a table is there with its stream or not at all. What a crash
 * left behind in data from before (a deleted table's stream and TTL) is cleaned up on start.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  ListTablesCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, ListStreamsCommand } from '@aws-sdk/client-dynamodb-streams';
import { afterEach, describe, expect, test } from 'vitest';
import { createStore } from '../../packages/engine/src/dynalite.ts';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { createTestTable, dynamoClient, streamsClient } from '../support/aws.ts';
import { onlyEmbedded, ownEngine } from '../support/engine.ts';
import { waitFor } from '../support/wait.ts';

const leftovers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const dispose of leftovers.splice(0).reverse()) await dispose();
});

function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-tables-'));
  leftovers.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `npm run engine -- --data <dir>` as a child process, to be killed as a crash would. */
async function engineProcess(dataDir: string) {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs('packages/engine/src/cli.ts'), '--port', '0', '--data', dataDir], {
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  leftovers.push(() => {
    child.kill('SIGKILL');
  });
  await waitFor(() => /http:\/\/127\.0\.0\.1:\d+/.test(output), { timeoutMs: 20_000, what: 'the engine to print its endpoint' });
  const endpoint = /http:\/\/127\.0\.0\.1:\d+/.exec(output)?.[0] as string;
  return {
    client: dynamoClient({ endpoint, maxAttempts: 1 }),
    streams: streamsClient({ endpoint, maxAttempts: 1 }),
    async crash() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

const createWithStream = (name: string) =>
  new CreateTableCommand({
    TableName: name,
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    BillingMode: 'PAY_PER_REQUEST',
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  });

describe.skipIf(onlyEmbedded)('table and stream definitions', () => {
  test('killed while creating tables, the engine comes back with each table and its stream, or without either', async () => {
    const dataDir = tempDir();
    const names = ['crash-a', 'crash-b', 'crash-c', 'crash-d'];
    for (const [i, name] of names.entries()) {
      const engine = await engineProcess(dataDir);
      const created = engine.client.send(createWithStream(name)).catch(() => undefined);
      // The kill lands before, during or after the write: later each time.
      await new Promise((resolve) => setTimeout(resolve, i * 3));
      await engine.crash();
      await created;
    }
    const engine = await engineProcess(dataDir);
    const { TableNames = [] } = await engine.client.send(new ListTablesCommand({}));
    const { Streams = [] } = await engine.streams.send(new ListStreamsCommand({}));
    for (const name of TableNames) {
      const { Table } = await engine.client.send(new DescribeTableCommand({ TableName: name }));
      expect(Table?.StreamSpecification).toEqual({ StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' });
    }
    expect(Streams.map((s) => s.TableName).sort()).toEqual([...TableNames].sort());
    // The last one was answered before the kill: it is there.
    await engine.client.send(createWithStream('answered'));
    await engine.crash();
    const after = await engineProcess(dataDir);
    const { Table } = await after.client.send(new DescribeTableCommand({ TableName: 'answered' }));
    expect(Table?.LatestStreamArn).toBeDefined();
  });

  test("a deleted table's stream and TTL setting left behind by a crash are closed and forgotten on start", async () => {
    const dataDir = tempDir();
    const first = await ownEngine({ dataDir });
    const { name, streamArn } = await createTestTable(first.client);
    await first.client.send(
      new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: 'ttl' } }),
    );
    await first.engine.close();
    // As an earlier engine could leave it: the table deleted, the rest not yet.
    const store = createStore({ path: dataDir, createTableMs: 0 });
    await store.db.open();
    await store.db.batch([{ type: 'del', key: `table~${name}` }]);
    await new Promise<void>((resolve, reject) => store.lifecycleManager.gracefulClose((err) => (err ? reject(err) : resolve())));

    const second = await ownEngine({ dataDir });
    leftovers.push(() => second.engine.close());
    const { StreamDescription } = await second.streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
    expect(StreamDescription?.StreamStatus).toBe('DISABLED');
    await createTestTable(second.client, { name, stream: false });
    const { TimeToLiveDescription } = await second.client.send(new DescribeTimeToLiveCommand({ TableName: name }));
    expect(TimeToLiveDescription?.TimeToLiveStatus).toBe('DISABLED');
  });
});
