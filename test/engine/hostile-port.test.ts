/**
 * Issue 49, finding 3, at small scale: the server's embedded engine listened on a loopback port
 * that checked a signature's shape only, nor Host nor Origin, so any local process, or a web
 * page through DNS rebinding, could read any tenant's run, raise its budget cap or delete the
 * table (`Host: rebind.attacker.example:<port>`, `Signature=00`). Now the engine has a port only
 * with RUNPLANE_ENGINE_PORT, and that port refuses other names, browsers, and (with
 * credentials in its environment) signatures not made with them.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { Logger } from '../../src/lib/logger.ts';
import { type RunningServer, startServer } from '../../src/server.ts';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { onlyEmbedded } from '../support/engine.ts';

const credentials = { AWS_ACCESS_KEY_ID: 'AKIDRUNPLANEHOSTILE', AWS_SECRET_ACCESS_KEY: 'not-known-to-the-attacker' };

async function serverWith(env: Record<string, string>, log?: Logger) {
  const table = uniqueName('hostile');
  const config = loadConfig({ PORT: '0', RUNPLANE_IN_MEMORY: 'true', RUNPLANE_GRAPHIQL: 'false', RUNPLANE_TABLE: table, ...env });
  const server = await startServer(config, { log: log ?? { info: () => {}, warn: () => {}, error: () => {} } });
  return { server, table };
}

async function gql(server: RunningServer, query: string) {
  const response = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: the test reads the answer by path
  return ((await response.json()) as { data: any }).data;
}

/** A request as a rebound page or a local process sends it: a well-formed signature whose value is made up. */
function attack(endpoint: string, operation: string, body: unknown, given: Record<string, string> & { keyId?: string } = {}) {
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const { keyId = 'anything', ...headers } = given;
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      endpoint,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `DynamoDB_20120810.${operation}`,
          'x-amz-date': date,
          authorization: `AWS4-HMAC-SHA256 Credential=${keyId}/${date.slice(0, 8)}/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=00`,
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const typeOf = (reply: { text: string }) => (JSON.parse(reply.text) as { __type?: string }).__type;

describe.skipIf(onlyEmbedded)("the embedded engine's port", () => {
  let server: RunningServer;
  let table: string;
  let endpoint: string;
  beforeAll(async () => {
    ({ server, table } = await serverWith({ RUNPLANE_ENGINE_PORT: '0' }));
    endpoint = server.engine?.endpoint as string;
    expect(await gql(server, 'mutation { createRun(input: { id: "victim", task: "secret plan", budgetCap: 5 }) { __typename } }')).toEqual({
      createRun: { __typename: 'Run' },
    });
  });
  afterAll(() => server.stop());

  test('a rebound name with a fake signature reads no run, raises no budget cap and deletes no table', async () => {
    const rebound = { host: `rebind.attacker.example:${new URL(endpoint).port}` };
    const read = await attack(endpoint, 'GetItem', { TableName: table, Key: marshalled(keys.run('default', 'victim')) }, rebound);
    expect(read.text).not.toContain('secret plan');
    expect(read.status).toBe(400);
    expect(JSON.parse(read.text).message).toContain('RUNPLANE_ENGINE_ALLOWED_HOSTS');
    const raise = await attack(
      endpoint,
      'UpdateItem',
      {
        TableName: table,
        Key: marshalled(keys.budget('default', 'victim')),
        UpdateExpression: 'SET cap = :cap',
        ExpressionAttributeValues: { ':cap': { N: '999999999' } },
      },
      rebound,
    );
    expect(typeOf(raise)).toBe('com.amazon.coral.service#AccessDeniedException');
    const drop = await attack(endpoint, 'DeleteTable', { TableName: table }, rebound);
    expect(typeOf(drop)).toBe('com.amazon.coral.service#AccessDeniedException');
    expect(await gql(server, '{ run(id: "victim") { task budget { cap } } }')).toEqual({
      run: { task: 'secret plan', budget: { cap: 5 } },
    });
  });

  test('a page on a loopback origin (a browser: it sends an Origin) is refused', async () => {
    const read = await attack(
      endpoint,
      'GetItem',
      { TableName: table, Key: marshalled(keys.run('default', 'victim')) },
      {
        origin: 'http://localhost:3000',
      },
    );
    expect(read.text).not.toContain('secret plan');
    expect(JSON.parse(read.text).message).toContain('RUNPLANE_ENGINE_CORS');
  });
});

describe.skipIf(onlyEmbedded)("the embedded engine's port with credentials in the server's environment", () => {
  let server: RunningServer;
  let table: string;
  beforeAll(async () => {
    ({ server, table } = await serverWith({ RUNPLANE_ENGINE_PORT: '0', ...credentials }));
  });
  afterAll(() => server.stop());

  test('a local process with a loopback Host and a made-up signature is refused; the server itself is served', async () => {
    const endpoint = server.engine?.endpoint as string;
    const unknown = await attack(endpoint, 'DeleteTable', { TableName: table });
    expect(typeOf(unknown)).toBe('com.amazon.coral.service#UnrecognizedClientException');
    const forged = await attack(endpoint, 'DeleteTable', { TableName: table }, { keyId: credentials.AWS_ACCESS_KEY_ID });
    expect(typeOf(forged)).toBe('com.amazon.coral.service#InvalidSignatureException');
    expect(await gql(server, 'mutation { createRun(input: { id: "r", task: "t", budgetCap: 1 }) { __typename } }')).toEqual({
      createRun: { __typename: 'Run' },
    });
  });
});

describe.skipIf(onlyEmbedded)('RUNPLANE_ENGINE_PORT', () => {
  test('unset, the embedded engine has no port: the server listens on its API port alone', async () => {
    const before = listeningPorts();
    const { server } = await serverWith({});
    try {
      expect(server.engine).toBeDefined();
      expect(server.engine?.endpoint).toBeUndefined();
      expect(server.engine?.port).toBeUndefined();
      const added = [...listeningPorts()].filter((port) => !before.has(port));
      expect(added).toEqual([Number(new URL(server.url).port)]);
      expect(await gql(server, 'mutation { createRun(input: { id: "r", task: "t", budgetCap: 1 }) { __typename } }')).toEqual({
        createRun: { __typename: 'Run' },
      });
    } finally {
      await server.stop();
    }
  });

  test('set, it has one, and without credentials the server says at start that any local process may use it', async () => {
    const warnings: string[] = [];
    const { server } = await serverWith({ RUNPLANE_ENGINE_PORT: '0' }, { info: () => {}, warn: (m) => warnings.push(m), error: () => {} });
    try {
      expect(server.engine?.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(listeningPorts().has(server.engine?.port as number)).toBe(true);
      expect(warnings).toEqual([
        `the embedded engine's port ${server.engine?.endpoint} takes requests from any local process (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to require requests signed with them)`,
      ]);
    } finally {
      await server.stop();
    }
  });
});

function marshalled(key: { pk: string; sk: string }) {
  return { pk: { S: key.pk }, sk: { S: key.sk } };
}

/** The TCP ports this process listens on, from /proc (Linux): its sockets' inodes in the kernel's tables. */
function listeningPorts() {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (socket) inodes.add(socket[1] as string);
    } catch {
      // Closed while listed.
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // st 0A: LISTEN.
      if (fields[3] === '0A' && inodes.has(fields[9] as string)) ports.add(Number.parseInt(fields[1]?.split(':')[1] ?? '', 16));
    }
  }
  return ports;
}
