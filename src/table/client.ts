/** The DynamoDB clients the stores and the stream poller use. */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import type { marshallOptions as MarshallOptions, unmarshallOptions as UnmarshallOptions } from '@aws-sdk/util-dynamodb';
import type { HttpAuthScheme } from '@smithy/types';
import { createDocuments } from './documents.ts';
import { type Answer, inProcessHandler } from './in-process.ts';

export interface DynamoConnection {
  /** Endpoint URL; absent for AWS's own endpoints (region and credentials from the SDK's default chain). */
  endpoint?: string;
  streamsEndpoint?: string;
  region: string;
  /** Static credentials for a local endpoint, which accepts any. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  maxAttempts?: number;
  /** The embedded engine of this process: requests go to it directly instead of over HTTP. */
  inProcess?: Answer;
}

/** JSON numbers are doubles: store the ones beyond 2^53 as they are, as JSON itself would. */
export const marshallOptions: MarshallOptions = {
  removeUndefinedValues: true,
  convertClassInstanceToMap: false,
  allowImpreciseNumbers: true,
};

/** JSON payloads may hold numbers beyond 2^53: read them as doubles, as JSON does, instead of failing. */
export const unmarshallOptions: UnmarshallOptions = { wrapNumbers: (value: string) => Number(value) };

/** The SDK's step that writes the User-Agent header (@aws-sdk/core's user agent middleware). */
export const USER_AGENT_MIDDLEWARE = 'getUserAgentMiddleware';

const unsigned: HttpAuthScheme = {
  schemeId: 'aws.auth#sigv4',
  identityProvider: (config) => config.getIdentityProvider('aws.auth#sigv4'),
  signer: { sign: async (request) => request },
};

/** The endpoint of every request, whatever the SDK's endpoint parameters say (one object, as the SDK's own cache hands out). */
const oneEndpoint = (endpoint: string) => {
  const found = { url: new URL(endpoint) };
  return () => found;
};

export function createClients(connection: DynamoConnection) {
  const common = {
    region: connection.region,
    credentials: connection.credentials,
    maxAttempts: connection.maxAttempts ?? 3,
    // A vanished endpoint must fail a request in bounded time, not hang it.
    requestHandler: connection.inProcess ? inProcessHandler(connection.inProcess) : { connectionTimeout: 3_000, requestTimeout: 10_000 },
    // A request that never leaves the process needs no SigV4 signature (an HMAC chain per request).
    ...(connection.inProcess ? { httpAuthSchemes: [unsigned] } : {}),
    // Nor DynamoDB's endpoint rules, which the SDK evaluates for each request (for a
    // transaction, naming its tables in a list, without its cache): there is one address.
    ...(connection.inProcess && connection.endpoint ? { endpointProvider: oneEndpoint(connection.endpoint) } : {}),
  };
  const dynamo = new DynamoDBClient({ ...common, endpoint: connection.endpoint });
  // The stores' items: the same SDK, its middleware resolved once per kind of command (documents.ts).
  const cached = new DynamoDBClient({ ...common, endpoint: connection.endpoint, cacheMiddleware: true });
  const doc = createDocuments(cached, dynamo, { marshallOptions, unmarshallOptions });
  const streamsEndpoint = connection.streamsEndpoint ?? connection.endpoint;
  const streams = new DynamoDBStreamsClient({ ...common, endpoint: streamsEndpoint });
  // The stream poller retries in its own way (keeping its iterators, with back-off): no SDK retries.
  const pollerStreams = new DynamoDBStreamsClient({ ...common, endpoint: streamsEndpoint, maxAttempts: 1 });
  // A request that never leaves the process tells no service who sent it: the User-Agent the
  // SDK builds for every request (escaping each part again) cost a tenth of an in-process put.
  if (connection.inProcess)
    for (const client of [dynamo, cached, streams, pollerStreams]) client.middlewareStack.remove(USER_AGENT_MIDDLEWARE);
  return {
    dynamo,
    /** The stores' requests go through this one (by way of `doc`): add middleware before the first. */
    cached,
    doc,
    streams,
    pollerStreams,
    destroy() {
      dynamo.destroy();
      cached.destroy();
      streams.destroy();
      pollerStreams.destroy();
    },
  };
}

export type Clients = ReturnType<typeof createClients>;
