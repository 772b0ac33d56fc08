/**
 * An engine with credentials checks every signature's value as DynamoDB does: the AWS SDK
 * signing with them is served; a wrong secret, an unknown key id, a date more than 15 minutes
 * off, a signed request altered on the way, or a presigned one used too late are refused with
 * DynamoDB's errors. The reference signer is the SDK's own (@smithy/signature-v4), not the
 * engine's code.
 */
import { createHash, createHmac } from 'node:crypto';
import { request } from 'node:http';
import { DynamoDBClient, GetItemCommand, ListTablesCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient, ListStreamsCommand } from '@aws-sdk/client-dynamodb-streams';
import { SignatureV4 } from '@smithy/signature-v4';
import type { SourceData } from '@smithy/types';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTestTable, uniqueName } from './support/aws.ts';
import { ownEngine } from './support/engine.ts';

const credentials = { accessKeyId: 'AKIDRUNPLANETEST', secretAccessKey: 'the-engine-secret' };
const region = 'us-east-1';

const bytes = (data: SourceData) =>
  typeof data === 'string'
    ? data
    : data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

/** node:crypto in the shape the SDK's signer takes. */
class Sha256 {
  private readonly hash;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData) {
    this.hash.update(bytes(data));
  }
  async digest() {
    return new Uint8Array(this.hash.digest());
  }
}

let setup: Awaited<ReturnType<typeof ownEngine>>;
let table: string;
beforeAll(async () => {
  setup = await ownEngine({ credentials });
  table = (await createTestTable(client(credentials), { stream: 'NEW_IMAGE' })).name;
});
afterAll(() => setup.engine.close());

/** An SDK client signing with `signWith`, without retries (the SDK corrects a skew on retry). */
function client(signWith: typeof credentials, systemClockOffset = 0) {
  return new DynamoDBClient({ endpoint: setup.engine.endpoint, region, credentials: signWith, maxAttempts: 1, systemClockOffset });
}

async function refusal(work: Promise<unknown>) {
  const err = (await work.then(
    () => undefined,
    (e: unknown) => e,
  )) as (Error & { $metadata?: { httpStatusCode?: number } }) | undefined;
  if (!err) throw new Error('the request was served');
  return { name: err.name, message: err.message, status: err.$metadata?.httpStatusCode };
}

const mismatch =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

describe('an engine with credentials', () => {
  test("the SDK signing with the engine's credentials is served, DynamoDB and Streams alike", async () => {
    const right = client(credentials);
    const item = { pk: { S: uniqueName('p') }, sk: { S: 's' }, body: { S: 'é'.repeat(1000) } };
    await right.send(new PutItemCommand({ TableName: table, Item: item }));
    expect((await right.send(new GetItemCommand({ TableName: table, Key: { pk: item.pk, sk: item.sk } }))).Item).toEqual(item);
    const streams = new DynamoDBStreamsClient({ endpoint: setup.engine.endpoint, region: 'eu-west-2', credentials, maxAttempts: 1 });
    expect((await streams.send(new ListStreamsCommand({ TableName: table }))).Streams).toHaveLength(1);
  });

  test('a wrong secret is an InvalidSignatureException; an unknown key id an UnrecognizedClientException', async () => {
    expect(await refusal(client({ ...credentials, secretAccessKey: 'guessed' }).send(new ListTablesCommand({})))).toEqual({
      name: 'InvalidSignatureException',
      message: mismatch,
      status: 400,
    });
    expect(await refusal(client({ ...credentials, accessKeyId: 'AKIDSOMEONEELSE' }).send(new ListTablesCommand({})))).toEqual({
      name: 'UnrecognizedClientException',
      message: 'The security token included in the request is invalid.',
      status: 400,
    });
  });

  test('a signature dated more than 15 minutes off is refused as expired or not yet current; 10 minutes off is served', async () => {
    const minutes = (n: number) => n * 60_000;
    const stale = await refusal(client(credentials, minutes(-20)).send(new ListTablesCommand({})));
    expect(stale.name).toBe('InvalidSignatureException');
    expect(stale.message).toMatch(/^Signature expired: \d{8}T\d{6}Z is now earlier than \d{8}T\d{6}Z \(\d{8}T\d{6}Z - 15 min\.\)$/);
    const early = await refusal(client(credentials, minutes(20)).send(new ListTablesCommand({})));
    expect(early.message).toMatch(
      /^Signature not yet current: \d{8}T\d{6}Z is still later than \d{8}T\d{6}Z \(\d{8}T\d{6}Z \+ 15 min\.\)$/,
    );
    await client(credentials, minutes(-10)).send(new ListTablesCommand({}));
    await client(credentials, minutes(10)).send(new ListTablesCommand({}));
  });

  test('a signed request altered on the way (its body, its target) or without Host signed is refused', async () => {
    const key = { pk: { S: uniqueName('p') }, sk: { S: 's' } };
    const body = JSON.stringify({ TableName: table, Key: key });
    const signed = await sign('GetItem', body);
    expect((await send(signed.headers, body)).status).toBe(200);
    const otherBody = await send(signed.headers, JSON.stringify({ TableName: table, Key: { ...key, sk: { S: 't' } } }));
    expect(JSON.parse(otherBody.text)).toEqual({ __type: 'com.amazon.coral.service#InvalidSignatureException', message: mismatch });
    const otherTarget = await send({ ...signed.headers, 'x-amz-target': 'DynamoDB_20120810.DeleteItem' }, body);
    expect(JSON.parse(otherTarget.text).message).toBe(mismatch);
    const hostUnsigned = await sign('GetItem', body, { unsignableHeaders: new Set(['host']) });
    expect(JSON.parse((await send(hostUnsigned.headers, body)).text)).toEqual({
      __type: 'com.amazon.coral.service#InvalidSignatureException',
      message: "'Host' must be a 'SignedHeader' in the AWS Authorization.",
    });
  });

  test('a presigned request is served within its X-Amz-Expires and refused after it, or altered', async () => {
    const body = JSON.stringify({});
    const fresh = await presign(body, new Date(), 300);
    expect((await send(fresh.headers, body, fresh.path)).status).toBe(200);
    expect(JSON.parse((await send(fresh.headers, '{"Limit":1}', fresh.path)).text).message).toBe(mismatch);
    const late = await presign(body, new Date(Date.now() - 120_000), 60);
    const refused = JSON.parse((await send(late.headers, body, late.path)).text);
    expect(refused.__type).toBe('com.amazon.coral.service#InvalidSignatureException');
    expect(refused.message).toMatch(/^Signature expired: .* - 1 min\.\)$/);
  });

  test('in this process, nothing is signed and everything is served', async () => {
    const answer = await setup.engine.answer('DynamoDB_20120810.ListTables', '{}');
    expect(answer.status).toBe(200);
  });
});

function signer() {
  return new SignatureV4({ credentials, region, service: 'dynamodb', sha256: Sha256 });
}

function unsignedRequest(target: string, body: string) {
  const { hostname, port } = new URL(setup.engine.endpoint);
  return {
    method: 'POST',
    protocol: 'http:',
    hostname,
    port: Number(port),
    path: '/',
    query: {},
    headers: { host: `${hostname}:${port}`, 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `DynamoDB_20120810.${target}` },
    body,
  };
}

async function sign(target: string, body: string, options: { unsignableHeaders?: Set<string> } = {}) {
  const signed = await signer().sign(unsignedRequest(target, body), options);
  return { headers: signed.headers as Record<string, string> };
}

/** Signed in the query string (the target stays a header, where the engine reads it). */
async function presign(body: string, signingDate: Date, expiresIn: number) {
  const presigned = await signer().presign(unsignedRequest('ListTables', body), {
    signingDate,
    expiresIn,
    unhoistableHeaders: new Set(['x-amz-target']),
  });
  const query = new URLSearchParams(presigned.query as Record<string, string>).toString().replace(/\+/g, '%20');
  return { headers: presigned.headers as Record<string, string>, path: `/?${query}` };
}

function send(headers: Record<string, string>, body: string, path = '/') {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(new URL(path, setup.engine.endpoint), { method: 'POST', headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
