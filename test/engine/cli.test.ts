import { type ChildProcess, spawn } from 'node:child_process';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, test } from 'vitest';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { help, parseEngineArgs } from '../../src/engine/args.ts';
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

  test.each([
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

test('npm run engine serves DynamoDB and stops cleanly on SIGTERM', async () => {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs('src/engine/cli.ts'), '--port', '0', '--in-memory'], {
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    await waitFor(() => /http:\/\/127\.0\.0\.1:\d+/.test(output), { timeoutMs: 20_000, what: 'the engine to print its endpoint' });
    const endpoint = /http:\/\/127\.0\.0\.1:\d+/.exec(output)?.[0] as string;
    const { TableNames } = await dynamoClient({ endpoint }).send(new ListTablesCommand({}));
    expect(TableNames).toEqual([]);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    child.kill('SIGKILL');
  }
});
