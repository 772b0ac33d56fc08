/** Clients for load generators and checkers: GraphQL over kept-alive HTTP, and the SDK's document client. */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { createServer } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

/** A GraphQL client over kept-alive connections, like the SDK's own; rejects on GraphQL errors. */
export function graphqlClient(url: string, key?: string) {
  const { hostname, port, pathname } = new URL(url);
  return (query: string, variables: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const body = JSON.stringify({ query, variables });
      const request = httpRequest(
        {
          hostname,
          port,
          path: pathname,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            ...(key ? { authorization: `Bearer ${key}` } : {}),
          },
        },
        (response: IncomingMessage) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk) => {
            text += chunk;
          });
          response.on('end', () => {
            const parsed = JSON.parse(text) as { data?: Record<string, unknown>; errors?: unknown[] };
            if (parsed.errors) reject(new Error(JSON.stringify(parsed.errors)));
            else resolve(parsed.data ?? {});
          });
        },
      );
      request.on('error', reject);
      request.end(body);
    });
}

/** The SDK's document client, which like the API takes and gives plain JSON. */
export function documentClient(endpoint: string) {
  return DynamoDBDocumentClient.from(
    new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' } }),
    { marshallOptions: { removeUndefinedValues: true } },
  );
}

/** A free loopback port (the OS picks one, it is let go, and the caller binds it). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
    probe.on('error', reject);
  });
