/** Many concurrent writers: every committed change appears in the stream exactly once, in commit order. */
import { PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, expect, test } from 'vitest';
import { createTestTable, dynamoClient, readStream, streamsClient } from './support/aws.ts';

const WRITERS = 16;
const ITEMS = 10_000;

let table: string;
let arn: string;
beforeAll(async () => {
  const created = await createTestTable(dynamoClient());
  table = created.name;
  arn = created.streamArn as string;
});

test(`${ITEMS} items written by ${WRITERS} concurrent clients give exactly ${ITEMS} records, in each writer's order`, async () => {
  const perWriter = ITEMS / WRITERS;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      const client = dynamoClient();
      // Each writer waits for one write before the next, so its writes have a commit order.
      for (let i = 0; i < perWriter; i++) {
        await client.send(
          new PutItemCommand({
            TableName: table,
            Item: { pk: { S: `writer-${writer}` }, sk: { S: `item-${String(i).padStart(5, '0')}` }, n: { N: String(i) } },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
      }
      client.destroy();
    }),
  );

  const records = await readStream(streamsClient(), arn, (all) => all.length >= ITEMS, 120_000);
  expect(records).toHaveLength(ITEMS);
  expect(records.every((r) => r.eventName === 'INSERT')).toBe(true);
  const seqs = records.map((r) => BigInt(r.dynamodb?.SequenceNumber as string));
  expect(new Set(seqs).size).toBe(ITEMS);
  expect(seqs.every((seq, i) => i === 0 || seq > (seqs[i - 1] as bigint))).toBe(true);
  for (let writer = 0; writer < WRITERS; writer++) {
    const mine = records.filter((r) => r.dynamodb?.Keys?.pk?.S === `writer-${writer}`).map((r) => Number(r.dynamodb?.NewImage?.n?.N));
    expect(mine).toEqual(Array.from({ length: perWriter }, (_, i) => i));
  }
});

test('concurrent updates of the same items appear per item in the order they committed', async () => {
  const items = 8;
  const updatesPerItem = 40;
  await Promise.all(
    Array.from({ length: items * 4 }, async (_, worker) => {
      const client = dynamoClient();
      for (let i = 0; i < updatesPerItem / 4; i++) {
        await client.send(
          new UpdateItemCommand({
            TableName: table,
            Key: { pk: { S: 'counters' }, sk: { S: `c${worker % items}` } },
            UpdateExpression: 'ADD n :one',
            ExpressionAttributeValues: { ':one': { N: '1' } },
          }),
        );
      }
      client.destroy();
    }),
  );
  const records = (
    await readStream(
      streamsClient(),
      arn,
      (all) => all.filter((r) => r.dynamodb?.Keys?.pk?.S === 'counters').length >= items * updatesPerItem,
      60_000,
    )
  ).filter((r) => r.dynamodb?.Keys?.pk?.S === 'counters');
  expect(records).toHaveLength(items * updatesPerItem);
  for (let c = 0; c < items; c++) {
    const values = records
      .filter((r) => r.dynamodb?.Keys?.sk?.S === `c${c}`)
      .map((r) => [Number(r.dynamodb?.OldImage?.n?.N ?? 0), Number(r.dynamodb?.NewImage?.n?.N)]);
    // Each record's old image is the previous record's new image: no change lost, none out of order.
    expect(values).toEqual(Array.from({ length: updatesPerItem }, (_, i) => [i, i + 1]));
  }
});
