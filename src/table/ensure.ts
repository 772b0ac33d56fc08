/**
 * Makes sure the table exists with the shape Runplane needs: creates it where allowed
 * (the embedded engine, a loopback endpoint), otherwise checks it and says what is wrong.
 */

import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  ResourceInUseException,
  ResourceNotFoundException,
  type TableDescription,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import type { Logger } from '../lib/logger.ts';
import { indexes, TTL_ATTRIBUTE, tableDefinition } from './definition.ts';

export interface EnsureTableOptions {
  /** Where to say what it found wrong but could live with. */
  log?: Logger;
  /** Create the table (and turn TTL on) when it is missing. */
  create: boolean;
  /** How long to wait for a new table to become ACTIVE. */
  timeoutMs?: number;
}

/** @returns whether the table was created now */
export async function ensureTable(client: DynamoDBClient, tableName: string, options: EnsureTableOptions) {
  let table = await describe(client, tableName);
  let created = false;
  if (!table) {
    if (!options.create) {
      throw new Error(`table ${tableName} does not exist; create it (see README "The table") or point RUNPLANE_TABLE at one that does`);
    }
    try {
      await client.send(new CreateTableCommand(tableDefinition(tableName)));
      created = true;
    } catch (err) {
      // Another replica created it first: fine.
      if (!(err instanceof ResourceInUseException)) throw err;
    }
  }
  // Also when another replica has just created it: serve only once it takes writes.
  if (table?.TableStatus !== 'ACTIVE' || (table.GlobalSecondaryIndexes ?? []).some((i) => i.IndexStatus !== 'ACTIVE')) {
    table = await waitActive(client, tableName, options.timeoutMs ?? 120_000);
  }
  checkShape(table as TableDescription);
  const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
  const ttl = TimeToLiveDescription?.TimeToLiveStatus;
  if (ttl === 'DISABLED' && options.create) {
    try {
      await client.send(
        new UpdateTimeToLiveCommand({ TableName: tableName, TimeToLiveSpecification: { Enabled: true, AttributeName: TTL_ATTRIBUTE } }),
      );
    } catch (err) {
      // Another replica starting on the same new table turned it on between our read and this.
      if (!(err instanceof Error && err.name === 'ValidationException' && /already enabled/i.test(err.message))) throw err;
    }
  } else if (ttl === 'DISABLED') {
    options.log?.warn(`TTL is off on table ${tableName}; expired rows will stay (reads still treat them as absent)`);
  }
  return created;
}

async function describe(client: DynamoDBClient, tableName: string) {
  try {
    return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  } catch (err) {
    if (err instanceof ResourceNotFoundException) return undefined;
    throw err;
  }
}

async function waitActive(client: DynamoDBClient, tableName: string, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 20; ; delay = Math.min(delay * 2, 2000)) {
    const table = await describe(client, tableName);
    const indexesReady = (table?.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE');
    if (table?.TableStatus === 'ACTIVE' && indexesReady) return table;
    if (Date.now() > deadline) throw new Error(`table ${tableName} did not become ACTIVE within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** The stores and the stream poller depend on this shape: refuse to start on anything else. */
function checkShape(table: TableDescription) {
  const problems: string[] = [];
  const keyNames = (table.KeySchema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  if (keyNames !== 'pk:HASH,sk:RANGE') problems.push(`its key must be pk (HASH) and sk (RANGE), not ${keyNames}`);
  for (const index of Object.values(indexes)) {
    if (!table.GlobalSecondaryIndexes?.some((i) => i.IndexName === index.name)) problems.push(`it lacks the index ${index.name}`);
  }
  const stream = table.StreamSpecification;
  if (!stream?.StreamEnabled || stream.StreamViewType !== 'NEW_AND_OLD_IMAGES') {
    problems.push('its stream must be enabled with NEW_AND_OLD_IMAGES');
  }
  if (problems.length > 0) throw new Error(`table ${table.TableName} cannot be used: ${problems.join('; ')}`);
}
