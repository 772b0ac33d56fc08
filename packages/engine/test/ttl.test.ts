import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { afterEach, describe, expect, test } from 'vitest';
import { createTestTable, dynamoClient, readStream, uniqueName } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const setTtl = (client: DynamoDBClient, table: string, enabled: boolean) =>
  client.send(new UpdateTimeToLiveCommand({ TableName: table, TimeToLiveSpecification: { Enabled: enabled, AttributeName: 'expiresAt' } }));
const enableTtl = (client: DynamoDBClient, table: string) => setTtl(client, table, true);
const TOO_SOON = 'Time to live has been modified multiple times within a fixed interval';

describe('UpdateTimeToLive and DescribeTimeToLive', () => {
  const client = dynamoClient({ maxAttempts: 1 });

  test('TTL starts disabled, is enabled on an attribute, and cannot be enabled twice', async () => {
    const { name } = await createTestTable(client, { stream: false });
    expect((await client.send(new DescribeTimeToLiveCommand({ TableName: name }))).TimeToLiveDescription?.TimeToLiveStatus).toBe(
      'DISABLED',
    );
    const { TimeToLiveSpecification } = await enableTtl(client, name);
    expect(TimeToLiveSpecification).toEqual({ Enabled: true, AttributeName: 'expiresAt' });
    await waitFor(async () => {
      const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
      return TimeToLiveDescription?.TimeToLiveStatus === 'ENABLED' && TimeToLiveDescription.AttributeName === 'expiresAt';
    });
    expect((await failure(enableTtl(client, name))).name).toBe('ValidationException');
  });

  test('a second change within the hour is refused with ValidationException', async () => {
    const { name } = await createTestTable(client, { stream: false });
    await enableTtl(client, name);
    const err = await failure(setTtl(client, name, false));
    expect(err.name).toBe('ValidationException');
    expect(err.message).toBe(TOO_SOON);
    expect((await client.send(new DescribeTimeToLiveCommand({ TableName: name }))).TimeToLiveDescription?.AttributeName).toBe('expiresAt');
  });

  test('a missing table is ResourceNotFoundException', async () => {
    expect((await failure(client.send(new DescribeTimeToLiveCommand({ TableName: uniqueName('missing') })))).name).toBe(
      'ResourceNotFoundException',
    );
    expect((await failure(enableTtl(client, uniqueName('missing')))).name).toBe('ResourceNotFoundException');
  });
});

describe('the table name of a TTL request is checked as every table operation checks it', () => {
  const client = dynamoClient({ maxAttempts: 1 });
  const lengthMessage = 'TableName must be at least 3 characters long and at most 255 characters long';

  test.each([
    ['missing', undefined, "The parameter 'TableName' is required but was not present in the request"],
    ['empty', '', lengthMessage],
    ['too short', 'a;', lengthMessage],
    ['too long', 'a'.repeat(256), lengthMessage],
    [
      'with a character outside the pattern',
      'abc;',
      "1 validation error detected: Value 'abc;' at 'tableName' failed to satisfy constraint: " +
        'Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+',
    ],
  ])('DescribeTimeToLive and UpdateTimeToLive with a name %s: ValidationException', async (_, name, message) => {
    const described = await failure(client.send(new DescribeTimeToLiveCommand({ TableName: name as string })));
    expect([described.name, described.message]).toEqual(['ValidationException', message]);
    const updated = await failure(
      client.send(
        new UpdateTimeToLiveCommand({ TableName: name as string, TimeToLiveSpecification: { Enabled: true, AttributeName: 'a' } }),
      ),
    );
    expect([updated.name, updated.message]).toEqual(['ValidationException', message]);
  });
});

describe.skipIf(onlyEmbedded)('the interval between TTL changes', () => {
  const leftovers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(leftovers.splice(0).map((dispose) => dispose()));
  });

  test('a change is allowed again an hour after the last, also after a restart', async () => {
    const clock = manualClock();
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-ttl-'));
    leftovers.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const first = await ownEngine({ now: clock.now, dataDir });
    const { name } = await createTestTable(first.client, { stream: false });
    await enableTtl(first.client, name);
    clock.advance(59 * 60_000);
    expect((await failure(setTtl(first.client, name, false))).message).toBe(TOO_SOON);
    await first.engine.close();

    const second = await ownEngine({ now: clock.now, dataDir });
    leftovers.push(() => second.engine.close());
    expect((await failure(setTtl(second.client, name, false))).message).toBe(TOO_SOON);
    clock.advance(60_000);
    await setTtl(second.client, name, false);
    expect((await failure(enableTtl(second.client, name))).message).toBe(TOO_SOON);
  });

  test('ttlUpdateIntervalMs: 0 lets TTL be switched on and off at will', async () => {
    const { engine, client } = await ownEngine({ ttlUpdateIntervalMs: 0 });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    for (const enabled of [true, false, true]) {
      await setTtl(client, name, enabled);
      const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: name }));
      expect(TimeToLiveDescription?.TimeToLiveStatus).toBe(enabled ? 'ENABLED' : 'DISABLED');
    }
  });
});

describe.skipIf(onlyEmbedded)('the TTL sweeper', () => {
  const leftovers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(leftovers.splice(0).map((dispose) => dispose()));
  });

  test('an item a write holds past the lock wait is left for the next sweep; the others are deleted', async () => {
    const clock = manualClock();
    const { engine, client } = await ownEngine({ now: clock.now, ttlDeleteDelayMs: 0, ttlSweepIntervalMs: 3_600_000, lockWaitMs: 200 });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    await enableTtl(client, name);
    const expired = { N: String(Math.floor(clock.now() / 1000) - 10) };
    for (const sk of ['a', 'b', 'c'])
      await client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: sk }, expiresAt: expired } }));
    clock.advance(1_000);
    const stall = engine.faults.inject({ operations: ['UpdateItem'], lockedLatencyMs: 600_000, times: 1 });
    leftovers.push(async () => stall.remove());
    const held = client.send(
      new UpdateItemCommand({
        TableName: name,
        Key: { pk: { S: 'p' }, sk: { S: 'b' } },
        UpdateExpression: 'SET x = :x',
        ExpressionAttributeValues: { ':x': { N: '1' } },
      }),
    );
    await waitFor(() => engine.stats().locks.held === 1, { what: 'the update holding b' });
    expect(await engine.control.sweepTtl()).toBe(2);
    stall.remove();
    await held;
    expect(await engine.control.sweepTtl()).toBe(1);
    const { Count } = await client.send(new ScanCommand({ TableName: name, Select: 'COUNT' }));
    expect(Count).toBe(0);
  });

  test('deletes items past their expiry plus the delay, as REMOVE records done by the service', async () => {
    const clock = manualClock();
    const { engine, client, streams } = await ownEngine({ now: clock.now, ttlDeleteDelayMs: 60_000, ttlSweepIntervalMs: 3_600_000 });
    leftovers.push(() => engine.close());
    const { name, streamArn } = await createTestTable(client);
    await enableTtl(client, name);
    const nowSeconds = Math.floor(clock.now() / 1000);
    const put = (sk: string, expiresAt?: { N: string } | { S: string }) =>
      client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: sk }, ...(expiresAt ? { expiresAt } : {}) } }));
    await put('expired', { N: String(nowSeconds - 10) });
    await put('future', { N: String(nowSeconds + 3600) });
    await put('no-expiry');
    await put('not-a-number', { S: 'soon' });
    await put('ancient', { N: String(nowSeconds - 6 * 365 * 24 * 3600) });
    const exists = async (sk: string) =>
      (await client.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'p' }, sk: { S: sk } } }))).Item !== undefined;

    // Expired, but not yet past the delay: still there (reads must filter expired rows themselves).
    expect(await engine.control.sweepTtl()).toBe(0);
    expect(await exists('expired')).toBe(true);

    clock.advance(61_000);
    expect(await engine.control.sweepTtl()).toBe(1);
    expect(await exists('expired')).toBe(false);
    for (const sk of ['future', 'no-expiry', 'not-a-number', 'ancient']) expect(await exists(sk)).toBe(true);

    const removes = (await readStream(streams, streamArn as string, (all) => all.some((r) => r.eventName === 'REMOVE'))).filter(
      (r) => r.eventName === 'REMOVE',
    );
    expect(removes).toHaveLength(1);
    expect(removes[0]?.dynamodb?.Keys?.sk).toEqual({ S: 'expired' });
    expect(removes[0]?.dynamodb?.OldImage?.expiresAt).toEqual({ N: String(nowSeconds - 10) });
    expect(removes[0]?.userIdentity).toEqual({ PrincipalId: 'dynamodb.amazonaws.com', Type: 'Service' });
  });

  test('runs by itself on its interval', async () => {
    const { engine, client } = await ownEngine({ ttlSweepIntervalMs: 20 });
    leftovers.push(() => engine.close());
    const { name } = await createTestTable(client, { stream: false });
    await enableTtl(client, name);
    const key = { pk: { S: 'p' }, sk: { S: 'x' } };
    await client.send(
      new PutItemCommand({ TableName: name, Item: { ...key, expiresAt: { N: String(Math.floor(Date.now() / 1000) - 1) } } }),
    );
    await waitFor(async () => (await client.send(new GetItemCommand({ TableName: name, Key: key }))).Item === undefined, {
      what: 'the sweeper to delete the expired item',
    });
  });
});
