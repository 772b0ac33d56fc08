/** Operations the engine does not serve are answered with a message naming them, and README lists every one. */
import { readFileSync } from 'node:fs';
import * as dynamodb from '@aws-sdk/client-dynamodb';
import { describe, expect, inject, test } from 'vitest';
import { unimplementedOperations } from '../src/operations.ts';
import { dynamoClient } from './support/aws.ts';
import { onlyEmbedded } from './support/engine.ts';

type AnyCommand = new (input: object) => Parameters<dynamodb.DynamoDBClient['send']>[0];

/** Every operation of the SDK's DynamoDB client, by the name of its command class. */
const sdkOperations = Object.entries(dynamodb)
  .filter(([name, value]) => /^[A-Z]\w+Command$/.test(name) && typeof value === 'function')
  .map(([name, value]) => ({ operation: name.slice(0, -'Command'.length), Command: value as unknown as AnyCommand }));

/** The engine's section of README, where the unimplemented operations are listed. */
function readmeEngineSection() {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('How it differs from DynamoDB');
  expect(start).toBeGreaterThan(0);
  return readme.slice(start, readme.indexOf('\n## ', start));
}

async function post(target: string | undefined, body = '{}') {
  const response = await fetch(inject('dynamodbEndpoint'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-amz-json-1.0', ...(target ? { 'x-amz-target': target } : {}) },
    body,
  });
  return { status: response.status, body: (await response.json()) as { __type: string; message: string } };
}

describe.skipIf(onlyEmbedded)('operations the engine does not serve', () => {
  const client = dynamoClient({ maxAttempts: 1 });

  test('each SDK operation is served or answered "not implemented" by name, and README lists exactly those', async () => {
    const notImplemented: string[] = [];
    for (const { operation, Command } of sdkOperations) {
      const outcome = await client.send(new Command({})).then(
        () => undefined,
        (err: Error) => err,
      );
      if (outcome?.name !== 'UnknownOperationException') continue;
      expect(outcome.message).toBe(
        `${operation} is not implemented by the embedded engine (see "How it differs from DynamoDB" in the README)`,
      );
      notImplemented.push(operation);
    }
    expect(notImplemented.sort()).toEqual([...unimplementedOperations].sort());
    const section = readmeEngineSection();
    for (const operation of notImplemented) expect(section).toContain(`\`${operation}\``);
  });

  test.each([
    ['DynamoDB_20120810.Frobnicate', 'Unknown operation Frobnicate: DynamoDB has no operation of that name'],
    [
      'DynamoDBStreams_20120810.PutRecord',
      'Unknown operation PutRecord: DynamoDB Streams has ListStreams, DescribeStream, GetShardIterator and GetRecords',
    ],
    ['Kinesis_20131202.PutRecord', 'Unknown service Kinesis_20131202: the engine serves DynamoDB_20120810 and DynamoDBStreams_20120810'],
    [undefined, 'The X-Amz-Target header must name a service and an operation: <Service>.<Operation>'],
  ])('target %s is refused with a message naming what is unknown', async (target, message) => {
    const { status, body } = await post(target);
    expect(status).toBe(400);
    expect(body).toEqual({ __type: 'com.amazon.coral.service#UnknownOperationException', message });
  });
});
