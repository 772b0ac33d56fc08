/**
 * What DynamoDB answers a request past a partition's throughput: ThrottlingException for an
 * on-demand table, ProvisionedThroughputExceededException for a provisioned one, each with
 * its ThrottlingReasons (`TableWriteKeyRangeThroughputExceeded`, `IndexReadKeyRange...`, with
 * the ARN of the table or index); in a transaction, a cancellation reason per action.
 */
import type { TableDescription } from '../dynalite.ts';
import { EngineError } from '../errors.ts';
import { inRegion } from '../region.ts';
import type { Line } from './units.ts';

const HOT_KEY_GUIDE = 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html';

const messages = {
  onDemand: {
    table: `Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: ${HOT_KEY_GUIDE}`,
    index:
      'Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.',
  },
  provisioned: {
    table:
      'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
    index:
      'The level of configured provisioned throughput for one or more global secondary indexes of the table was exceeded. Consider increasing your provisioning level for the under-provisioned global secondary indexes with the UpdateTable API.',
  },
};

export type Kind = 'read' | 'write';

const onDemand = (table: TableDescription) =>
  (table.BillingModeSummary as { BillingMode?: string } | undefined)?.BillingMode === 'PAY_PER_REQUEST';
/** Local indexes share the table's partitions: their units throttle as the table's. */
const onIndex = (line: Line) => line.index?.global === true;

function reasons(lines: Line[], kind: Kind, region: string) {
  const seen = new Set<string>();
  const list: { reason: string; resource: string }[] = [];
  for (const line of lines) {
    const arn = inRegion(line.table.TableArn, region);
    const resource = onIndex(line) ? `${arn}/index/${line.index?.name}` : arn;
    const reason = `${onIndex(line) ? 'Index' : 'Table'}${kind === 'read' ? 'Read' : 'Write'}KeyRangeThroughputExceeded`;
    if (seen.has(reason + resource)) continue;
    seen.add(reason + resource);
    list.push({ reason, resource });
  }
  return list;
}

/** The refusal of a request whose `short` lines found their partitions' buckets short. */
export function throttled(short: Line[], kind: Kind, region: string) {
  const [first] = short as [Line];
  const on = onIndex(first) ? 'index' : 'table';
  if (onDemand(first.table)) {
    return new EngineError(400, 'com.amazon.coral.availability#ThrottlingException', messages.onDemand[on], {
      throttlingReasons: reasons(short, kind, region),
    });
  }
  return new EngineError(400, 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException', messages.provisioned[on], {
    ThrottlingReasons: reasons(short, kind, region),
  });
}

/** The cancellation reason of a transaction's action whose partition was short. */
export function throttledReason(line: Line) {
  const on = onIndex(line) ? 'index' : 'table';
  return onDemand(line.table)
    ? { Code: 'ThrottlingError', Message: messages.onDemand[on] }
    : { Code: 'ProvisionedThroughputExceeded', Message: messages.provisioned[on] };
}

/** Whether `err` is a throttling refusal of a request (what a batch turns into unprocessed items). */
export function isThrottled(err: unknown): err is EngineError {
  return err instanceof EngineError && (err.code === 'ThrottlingException' || err.code === 'ProvisionedThroughputExceededException');
}
