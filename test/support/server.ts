/**
 * A real Runplane server for a test file: its own table on the test run's engine, a free
 * port, real HTTP. Counts the DynamoDB requests it makes.
 */
import { afterAll, inject } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { silentLogger } from '../../src/lib/logger.ts';
import { type RunningServer, type ServerOptions, startServer } from '../../src/server.ts';
import { uniqueName } from './aws.ts';
import { onEveryCommand } from './commands.ts';

export interface GraphQLResponse<T> {
  data?: T;
  errors?: { message: string; path?: string[]; extensions?: { code?: string; [key: string]: unknown } }[];
}

export interface TestServer {
  url: string;
  table: string;
  server: RunningServer;
  /** DynamoDB requests made since the server started, by command name. */
  requests: string[];
  /** The same requests with their input (to tell a request's own from the server's background work). */
  requestInputs: { name: string; input: unknown }[];
  // biome-ignore lint/suspicious/noExplicitAny: tests read deep into responses by path
  gql<T = any>(query: string, variables?: Record<string, unknown>, options?: { key?: string }): Promise<GraphQLResponse<T>>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  /** Another DynamoDB endpoint (an engine of the test's own). */
  endpoint?: string;
  /** An existing table (a second replica on the same table). */
  table?: string;
  poll?: ServerOptions['poll'];
  /** envelop plugins after the server's own. */
  plugins?: ServerOptions['plugins'];
  throttleRetry?: ServerOptions['throttleRetry'];
  /** Stop it after the test file (default) or leave that to the test. */
  stopAfterAll?: boolean;
}

/** Starts a server (stopped after the test file unless told otherwise). */
export async function startTestServer(options: TestServerOptions | Record<string, string> = {}): Promise<TestServer> {
  const opts: TestServerOptions =
    'env' in options ||
    'endpoint' in options ||
    'table' in options ||
    'poll' in options ||
    'plugins' in options ||
    'throttleRetry' in options
      ? options
      : { env: options as Record<string, string> };
  const table = opts.table ?? uniqueName('runplane');
  const requests: string[] = [];
  const requestInputs: TestServer['requestInputs'] = [];
  const config = loadConfig({
    PORT: '0',
    AWS_ENDPOINT_URL_DYNAMODB: opts.endpoint ?? inject('dynamodbEndpoint'),
    RUNPLANE_TABLE: table,
    RUNPLANE_GRAPHIQL: 'false',
    // Idle connections kept longer than a test's longest pause between requests: a busy machine
    // delays fetch's own idle timer past the server's 5 s, and a request sent on a connection the
    // server is closing is reset (tests of the idle cut set their own, in slow-clients.test.ts).
    RUNPLANE_KEEP_ALIVE_SECONDS: '60',
    ...opts.env,
  });
  const server = await startServer(config, {
    poll: opts.poll,
    plugins: opts.plugins,
    throttleRetry: opts.throttleRetry,
    onClients: (clients) =>
      onEveryCommand(clients, (name, input) => {
        requests.push(name);
        requestInputs.push({ name, input });
      }),
    log: silentLogger,
  });
  if (opts.stopAfterAll !== false) afterAll(() => server.stop());
  return {
    url: server.url,
    table,
    server,
    requests,
    requestInputs,
    gql: async (query, variables = {}, { key } = {}) => {
      const response = await fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ query, variables }),
      });
      return (await response.json()) as never;
    },
  };
}
