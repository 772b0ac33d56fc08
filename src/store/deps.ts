import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** What every store is built from. */
export interface StoreDeps {
  doc: DynamoDBDocumentClient;
  tableName: string;
  /** The clock: lease expiry and timestamps (tests move it). */
  now: () => Date;
}
