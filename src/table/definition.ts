/** The one table: keys, the two listing indexes, the stream and TTL. */
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { attr } from './attributes.ts';

export const indexes = {
  /** All runs of a tenant, newest first, spread over RUN_LIST_SHARDS partitions. */
  runsByTenant: { name: 'runsByTenant', pk: 'gsi1pk', sk: 'gsi1sk' },
  /** Runs of a tenant in one status, newest first, likewise spread. */
  runsByStatus: { name: 'runsByStatus', pk: 'gsi2pk', sk: 'gsi2sk' },
} as const;

export const TTL_ATTRIBUTE = attr.ttl;

export function tableDefinition(tableName: string): CreateTableCommandInput {
  const index = ({ name, pk, sk }: (typeof indexes)[keyof typeof indexes]) => ({
    IndexName: name,
    KeySchema: [
      { AttributeName: pk, KeyType: 'HASH' as const },
      { AttributeName: sk, KeyType: 'RANGE' as const },
    ],
    Projection: { ProjectionType: 'ALL' as const },
  });
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: [
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ],
    AttributeDefinitions: ['pk', 'sk', 'gsi1pk', 'gsi1sk', 'gsi2pk', 'gsi2sk'].map((name) => ({
      AttributeName: name,
      AttributeType: 'S' as const,
    })),
    GlobalSecondaryIndexes: [index(indexes.runsByTenant), index(indexes.runsByStatus)],
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}
