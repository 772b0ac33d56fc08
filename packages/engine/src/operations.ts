/**
 * What the engine answers for an operation it does not serve: a clear message naming it,
 * as UnknownOperationException (what DynamoDB answers for a name it does not know), so an
 * SDK surfaces it as a client error and never retries it.
 */
import { errors } from './errors.ts';

export const DYNAMODB_SERVICE = 'DynamoDB_20120810';
export const STREAMS_SERVICE = 'DynamoDBStreams_20120810';

/**
 * DynamoDB operations of the API (as of @aws-sdk/client-dynamodb 3.1169) that the engine
 * does not implement. README's list under "How it differs from DynamoDB" is this one.
 */
export const unimplementedOperations = [
  // PartiQL
  'ExecuteStatement',
  'BatchExecuteStatement',
  'ExecuteTransaction',
  // Backups and point-in-time recovery
  'CreateBackup',
  'DeleteBackup',
  'DescribeBackup',
  'ListBackups',
  'RestoreTableFromBackup',
  'RestoreTableToPointInTime',
  'DescribeContinuousBackups',
  'UpdateContinuousBackups',
  // Global tables and replica auto scaling
  'CreateGlobalTable',
  'DescribeGlobalTable',
  'DescribeGlobalTableSettings',
  'ListGlobalTables',
  'UpdateGlobalTable',
  'UpdateGlobalTableSettings',
  'DescribeTableReplicaAutoScaling',
  'UpdateTableReplicaAutoScaling',
  // Import and export
  'ExportTableToPointInTime',
  'DescribeExport',
  'ListExports',
  'ImportTable',
  'DescribeImport',
  'ListImports',
  // Bulk operations
  'StartBulkPutItems',
  'DescribeBulkOperation',
  'ListBulkOperations',
  'CancelBulkOperation',
  // Kinesis streaming destinations
  'DescribeKinesisStreamingDestination',
  'EnableKinesisStreamingDestination',
  'DisableKinesisStreamingDestination',
  'UpdateKinesisStreamingDestination',
  // Contributor Insights
  'DescribeContributorInsights',
  'ListContributorInsights',
  'UpdateContributorInsights',
  // Resource policies
  'GetResourcePolicy',
  'PutResourcePolicy',
  'DeleteResourcePolicy',
  // Vector search
  'SearchVectors',
  // Account and endpoint information
  'DescribeLimits',
  'DescribeEndpoints',
] as const;

const unimplemented = new Set<string>(unimplementedOperations);
const streamsOperationNames = 'ListStreams, DescribeStream, GetShardIterator and GetRecords';

/** The error for a request the engine does not serve, saying which part of it is unknown. */
export function unsupported(service: string, operation: string) {
  if (!service || !operation) {
    return errors.unknownOperation('The X-Amz-Target header must name a service and an operation: <Service>.<Operation>');
  }
  if (service === DYNAMODB_SERVICE && unimplemented.has(operation)) {
    return errors.unknownOperation(
      `${operation} is not implemented by the embedded engine (see "How it differs from DynamoDB" in the README)`,
    );
  }
  if (service === DYNAMODB_SERVICE)
    return errors.unknownOperation(`Unknown operation ${operation}: DynamoDB has no operation of that name`);
  if (service === STREAMS_SERVICE) {
    return errors.unknownOperation(`Unknown operation ${operation}: DynamoDB Streams has ${streamsOperationNames}`);
  }
  return errors.unknownOperation(`Unknown service ${service}: the engine serves ${DYNAMODB_SERVICE} and ${STREAMS_SERVICE}`);
}
