/** Runs and rows for tests, built with the API and the table's own key functions (never keys written by hand). */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from './aws.ts';
import type { TestServer } from './server.ts';

/** The tenant of a server without API keys. */
export const OPEN_TENANT = 'default';

/** Creates a run through the API (a fresh id unless given) and returns its id. */
export async function newRun(
  api: TestServer,
  { budgetCap = 1000, task = 't', id = uniqueName('run'), key }: { budgetCap?: number; task?: string; id?: string; key?: string } = {},
) {
  const created = await api.gql(
    'mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }',
    { input: { id, task, budgetCap } },
    { key },
  );
  if (created.data?.createRun?.__typename !== 'Run') throw new Error(`could not create run ${id}: ${JSON.stringify(created)}`);
  return id;
}

/** Appends an event through the API and returns what appendEvent answered. */
export async function appendEvent(
  api: TestServer,
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

/** Puts an event row straight into the table, as a service that bypasses the API would. */
export async function putEventRow(
  api: TestServer,
  runId: string,
  seq: number,
  { type = 'direct', payload = { via: 'sdk' } as unknown, tenant = OPEN_TENANT } = {},
) {
  await api.server.clients.doc.send(
    new PutCommand({
      TableName: api.table,
      Item: { ...keys.event(tenant, runId, seq), runId, seq, type, payload, createdAt: new Date().toISOString() },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/** The partition key of a run's rows, for reading the table directly. */
export const runPartition = (runId: string, tenant = OPEN_TENANT) => keys.runPartition(tenant, runId);
