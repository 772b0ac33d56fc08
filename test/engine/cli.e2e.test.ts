import { type ChildProcess, spawn } from 'node:child_process';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, test } from 'vitest';
import { credentialsFrom, help, parseEngineArgs } from '../../packages/engine/src/args.ts';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { dynamoClient } from '../support/aws.ts';
import { waitFor } from '../support/wait.ts';

describe('engine flags', () => {
  test('--help documents every flag the parser accepts', () => {
    for (const flag of [
      '--port',
      '--host',
      '--data',
      '--in-memory',
      '--region',
      '--iterator-ttl',
      '--stream-retention',
      '--shard-max-age',
      '--shard-max-records',
      '--stream-cache-mb',
      '--ttl-interval',
      '--ttl-delay',
      '--ttl-update-interval',
      '--lock-wait',
      '--table-delay',
      '--cors',
      '--allowed-hosts',
      '--partition-limits',
      '--partition-wcu',
      '--partition-rcu',
      '--help',
    ]) {
      expect(help).toContain(flag);
    }
    expect(parseEngineArgs(['--help'])).toBe('help');
  });

  test('durations and numbers are parsed with their units', () => {
    expect(
      parseEngineArgs(['--port', '0', '--in-memory', '--iterator-ttl', '90s', '--stream-retention', '2h', '--ttl-delay', '500ms']),
    ).toMatchObject({
      port: 0,
      dataDir: undefined,
      iteratorTtlMs: 90_000,
      streamRetentionMs: 7_200_000,
      ttlDeleteDelayMs: 500,
    });
  });

  test("--partition-limits turns the throughput model on, with DynamoDB's limits unless told others", () => {
    expect(parseEngineArgs([])).toMatchObject({ partitionLimits: undefined });
    expect(parseEngineArgs(['--partition-limits'])).toMatchObject({ partitionLimits: {} });
    expect(parseEngineArgs(['--partition-limits', '--partition-wcu', '20', '--partition-rcu', '60'])).toMatchObject({
      partitionLimits: { writeUnits: 20, readUnits: 60 },
    });
    expect(() => parseEngineArgs(['--partition-wcu', '20'])).toThrow(/need --partition-limits/);
    expect(() => parseEngineArgs(['--partition-limits', '--partition-wcu', '0'])).toThrow(/--partition-wcu must be a whole number from 1/);
  });

  test('--table-delay and --cors set the table transition time and CORS', () => {
    expect(parseEngineArgs(['--table-delay', '500ms', '--cors'])).toMatchObject({ createTableMs: 500, cors: true });
    expect(parseEngineArgs([])).toMatchObject({ createTableMs: undefined, cors: undefined });
  });

  test('--allowed-hosts takes names, comma-separated, lowercased; none by default', () => {
    expect(parseEngineArgs(['--allowed-hosts', 'engine, DB.internal'])).toMatchObject({ allowedHosts: ['engine', 'db.internal'] });
    expect(parseEngineArgs([])).toMatchObject({ allowedHosts: undefined });
  });

  test('credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY together, or not at all', () => {
    expect(credentialsFrom({ AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 'secret' })).toEqual({
      accessKeyId: 'id',
      secretAccessKey: 'secret',
    });
    expect(credentialsFrom({})).toBeUndefined();
    expect(credentialsFrom({ AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' })).toBeUndefined();
    expect(() => credentialsFrom({ AWS_ACCESS_KEY_ID: 'id' })).toThrow(
      'AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY: set both to require signatures made with them, or neither',
    );
  });

  test.each([
    [['--allowed-hosts', 'engine:8000'], /--allowed-hosts must be host names such as engine or db\.internal/],
    [['--port', '70000'], /--port must be a whole number from 0 to 65535 \(got "70000"\)/],
    [['--iterator-ttl', '15'], /--iterator-ttl must be a duration/],
    [['--shard-max-records', '0'], /--shard-max-records must be a whole number from 1/],
    [['--data', 'x', '--in-memory'], /exclude each other/],
    [['--bogus'], /Unknown option '--bogus'/],
    [['--region', 'Mars'], /--region must be a region name such as eu-west-2 \(got "Mars"\)/],
  ])('%j is refused with a message naming it', (argv, message) => {
    expect(() => parseEngineArgs(argv)).toThrow(message);
  });
});

function startCli(env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs('packages/engine/src/cli.ts'), '--port', '0', '--in-memory'], {
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
  });
  let output = '';
  let errors = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    errors += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, exited, output: () => output, errors: () => errors };
}

const ENDPOINT = /http:\/\/127\.0\.0\.1:\d+/;

test('npm run engine serves DynamoDB, says any local process may use it, and stops cleanly on SIGTERM', async () => {
  const engine = startCli({});
  try {
    await waitFor(() => ENDPOINT.test(engine.output()), { timeoutMs: 20_000, what: 'the engine to print its endpoint' });
    const endpoint = ENDPOINT.exec(engine.output())?.[0] as string;
    const { TableNames } = await dynamoClient({ endpoint }).send(new ListTablesCommand({}));
    expect(TableNames).toEqual([]);
    await waitFor(() => engine.errors().includes('\n'), { what: 'the line on stderr' });
    expect(engine.errors()).toBe(
      `engine: no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in its environment: any local process may use ${endpoint} (set both to require requests signed with them)\n`,
    );
    engine.child.kill('SIGTERM');
    expect(await engine.exited).toBe(0);
  } finally {
    engine.child.kill('SIGKILL');
  }
});

test('npm run engine with credentials in its environment serves only requests signed with them', async () => {
  const credentials = { accessKeyId: 'AKIDCLITEST', secretAccessKey: 'cli-secret' };
  const engine = startCli({ AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey });
  try {
    await waitFor(() => ENDPOINT.test(engine.output()), { timeoutMs: 20_000, what: 'the engine to print its endpoint' });
    const endpoint = ENDPOINT.exec(engine.output())?.[0] as string;
    const signedBy = (signWith: typeof credentials) =>
      new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: signWith, maxAttempts: 1 }).send(new ListTablesCommand({}));
    expect((await signedBy(credentials)).TableNames).toEqual([]);
    await expect(signedBy({ ...credentials, secretAccessKey: 'wrong' })).rejects.toThrow(/^The request signature we calculated/);
    await expect(dynamoClient({ endpoint, maxAttempts: 1 }).send(new ListTablesCommand({}))).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
    });
    expect(engine.errors()).toBe('');
    engine.child.kill('SIGTERM');
    expect(await engine.exited).toBe(0);
  } finally {
    engine.child.kill('SIGKILL');
  }
});
