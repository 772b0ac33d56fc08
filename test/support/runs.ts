/** Runs and rows for tests, built with the API and the table's own key functions (never keys written by hand). */
import { type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from './aws.ts';
import type { TestServer } from './server.ts';

/** The tenant of a server without API keys. */
export const OPEN_TENANT = 'default';

/** What answers GraphQL: a test server, or a replica (which sends no key). */
export interface GraphQLEndpoint {
  // biome-ignore lint/suspicious/noExplicitAny: tests read deep into responses by path
  gql(query: string, variables?: Record<string, unknown>, options?: { key?: string }): Promise<{ data?: any; errors?: unknown }>;
}

/**
 * Creates a run through the API (a fresh id unless given) and returns its id; with `events`,
 * appends that many (or one per payload given) of `type` after it.
 */
export async function newRun(
  api: GraphQLEndpoint,
  {
    budgetCap = 1000,
    task = 't',
    id = uniqueName('run'),
    key,
    events = 0,
    type = 'step',
  }: { budgetCap?: number; task?: string; id?: string; key?: string; events?: number | unknown[]; type?: string } = {},
) {
  const created = await api.gql(
    'mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }',
    { input: { id, task, budgetCap } },
    { key },
  );
  if (created.data?.createRun?.__typename !== 'Run') throw new Error(`could not create run ${id}: ${JSON.stringify(created)}`);
  const payloads = typeof events === 'number' ? Array.from({ length: events }, () => null) : events;
  for (const payload of payloads) {
    const appended = await appendEvent(api, id, { type, payload, key });
    if (appended?.__typename !== 'Event') throw new Error(`could not append to run ${id}: ${JSON.stringify(appended)}`);
  }
  return id;
}

/** Appends an event through the API and returns what appendEvent answered. */
export async function appendEvent(
  api: GraphQLEndpoint,
  runId: string,
  { type = 'step', payload = null as unknown, key }: { type?: string; payload?: unknown; key?: string } = {},
) {
  const answer = await api.gql(
    'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }',
    { input: { runId, type, payload } },
    { key },
  );
  return answer.data?.appendEvent as { __typename: string; seq?: number };
}

/** A table to write rows into directly: a test server's, or any through a document client. */
export type TableWriter = TestServer | { table: string; doc: DynamoDBDocumentClient };

/**
 * Puts an event row straight into the table, as a service that bypasses the API would (so
 * without the server's fast path: subscribers learn of it from the table's stream). The row
 * has what the server writes; `bare` leaves out all but the keys, seq and type, as a careless
 * writer might.
 */
export async function putEventRow(
  where: TableWriter,
  runId: string,
  seq: number,
  { type = 'direct', payload = { via: 'sdk' } as unknown, tenant = OPEN_TENANT, bare = false } = {},
) {
  const doc = 'server' in where ? where.server.clients.doc : where.doc;
  const full = { runId, payload, createdAt: new Date().toISOString() };
  await doc.send(
    new PutCommand({
      TableName: where.table,
      Item: { ...keys.event(tenant, runId, seq), seq, type, ...(bare ? {} : full) },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/** The partition key of a run's rows, for reading the table directly. */
export const runPartition = (runId: string, tenant = OPEN_TENANT) => keys.runPartition(tenant, runId);

/** A run's event rows as the table holds them (one consistent Query of its partition). */
export async function storedEventRows(api: TestServer, runId: string, tenant = OPEN_TENANT) {
  const { Items = [] } = await api.server.clients.doc.send(
    new QueryCommand({
      TableName: api.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :evt)',
      ExpressionAttributeValues: { ':pk': runPartition(runId, tenant), ':evt': 'evt#' },
      ConsistentRead: true,
    }),
  );
  return Items;
}
