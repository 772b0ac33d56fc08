/** Shard rollover, iterator expiry and trimming: what DynamoDB does on its own schedule, forced or on a test clock. */
import { BatchWriteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type Shard,
} from '@aws-sdk/client-dynamodb-streams';
import { afterEach, describe, expect, test } from 'vitest';
import { createTestTable, readStream } from './support/aws.ts';
import { manualClock, onlyEmbedded, ownEngine } from './support/engine.ts';
import { failure } from './support/failure.ts';
import { waitFor } from './support/wait.ts';

const leftovers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(leftovers.splice(0).map((dispose) => dispose()));
});

async function setUp(options: Parameters<typeof ownEngine>[0] = {}) {
  const setup = await ownEngine(options);
  leftovers.push(() => setup.engine.close());
  const { name, streamArn } = await createTestTable(setup.client);
  const put = (sk: string) => setup.client.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'p' }, sk: { S: sk } } }));
  return { ...setup, table: name, arn: streamArn as string, put };
}

async function shards(streams: DynamoDBStreamsClient, arn: string) {
  return (await streams.send(new DescribeStreamCommand({ StreamArn: arn }))).StreamDescription?.Shards as Shard[];
}

async function iterator(streams: DynamoDBStreamsClient, arn: string, shardId: string, type = 'TRIM_HORIZON', seq?: string) {
  const { ShardIterator } = await streams.send(
    new GetShardIteratorCommand({ StreamArn: arn, ShardId: shardId, ShardIteratorType: type as never, SequenceNumber: seq }),
  );
  return ShardIterator as string;
}

const sortKeys = (records: { dynamodb?: { Keys?: Record<string, { S?: string }> } }[]) => records.map((r) => r.dynamodb?.Keys?.sk?.S);

describe.skipIf(onlyEmbedded)('shard rollover', () => {
  test('a forced rollover closes the shard and opens a child; readers follow the lineage', async () => {
    const { engine, streams, table, arn, put } = await setUp();
    await put('1');
    await put('2');
    engine.control.rolloverShard(table);
    await put('3');

    const [parent, child] = await shards(streams, arn);
    expect(parent?.SequenceNumberRange?.EndingSequenceNumber).toBeDefined();
    expect(child?.ParentShardId).toBe(parent?.ShardId);
    expect(child?.SequenceNumberRange?.EndingSequenceNumber).toBeUndefined();
    expect(BigInt(child?.SequenceNumberRange?.StartingSequenceNumber as string)).toBeGreaterThan(
      BigInt(parent?.SequenceNumberRange?.EndingSequenceNumber as string),
    );

    // Reading a closed parent to its end leaves no NextShardIterator.
    const start = await iterator(streams, arn, parent?.ShardId as string);
    const partial = await streams.send(new GetRecordsCommand({ ShardIterator: start, Limit: 1 }));
    expect(sortKeys(partial.Records ?? [])).toEqual(['1']);
    const rest = await streams.send(new GetRecordsCommand({ ShardIterator: partial.NextShardIterator }));
    expect(sortKeys(rest.Records ?? [])).toEqual(['2']);
    expect(rest.NextShardIterator).toBeUndefined();

    expect(sortKeys(await readStream(streams, arn, (all) => all.length >= 3))).toEqual(['1', '2', '3']);
  });

  test('a shard rolls over by itself after its record count', async () => {
    const { streams, arn, put } = await setUp({ shardMaxRecords: 4 });
    for (let i = 0; i < 10; i++) await put(String(i).padStart(2, '0'));
    const all = await shards(streams, arn);
    expect(all.length).toBe(3);
    expect(all.map((s) => s.ParentShardId)).toEqual([undefined, all[0]?.ShardId, all[1]?.ShardId]);
    // DescribeStream pages through shards.
    const page = (await streams.send(new DescribeStreamCommand({ StreamArn: arn, Limit: 2 }))).StreamDescription;
    expect(page?.Shards?.map((s) => s.ShardId)).toEqual([all[0]?.ShardId, all[1]?.ShardId]);
    expect(page?.LastEvaluatedShardId).toBe(all[1]?.ShardId);
    const rest = (await streams.send(new DescribeStreamCommand({ StreamArn: arn, ExclusiveStartShardId: page?.LastEvaluatedShardId })))
      .StreamDescription;
    expect(rest?.Shards?.map((s) => s.ShardId)).toEqual([all[2]?.ShardId]);
    expect(rest?.LastEvaluatedShardId).toBeUndefined();
    expect(sortKeys(await readStream(streams, arn, (records) => records.length >= 10))).toEqual(
      Array.from({ length: 10 }, (_, i) => String(i).padStart(2, '0')),
    );
  });

  test('a shard rolls over by itself after its age', async () => {
    const clock = manualClock();
    const { streams, arn, put } = await setUp({ now: clock.now, shardMaxAgeMs: 60_000 });
    await put('1');
    clock.advance(61_000);
    await put('2');
    const all = await shards(streams, arn);
    expect(all.length).toBe(2);
    expect(all[1]?.ParentShardId).toBe(all[0]?.ShardId);
  });
});

describe.skipIf(onlyEmbedded)('iterator expiry', () => {
  test('an iterator older than its lifetime is refused with ExpiredIteratorException; a new one resumes after the last record', async () => {
    const clock = manualClock();
    const { streams, arn, put } = await setUp({ now: clock.now, iteratorTtlMs: 60_000 });
    await put('1');
    const [shard] = await shards(streams, arn);
    const first = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string) }));
    const last = first.Records?.at(-1)?.dynamodb?.SequenceNumber as string;
    await put('2');

    // Each NextShardIterator gets a fresh lifetime ...
    clock.advance(50_000);
    const kept = await streams.send(new GetRecordsCommand({ ShardIterator: first.NextShardIterator }));
    expect(sortKeys(kept.Records ?? [])).toEqual(['2']);
    // ... and expires once that has passed.
    clock.advance(61_000);
    const err = await failure(streams.send(new GetRecordsCommand({ ShardIterator: kept.NextShardIterator })));
    expect(err.name).toBe('ExpiredIteratorException');

    const resumed = await streams.send(
      new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string, 'AFTER_SEQUENCE_NUMBER', last) }),
    );
    expect(sortKeys(resumed.Records ?? [])).toEqual(['2']);
  });

  test('expiring iterators on demand', async () => {
    const { engine, streams, table, arn, put } = await setUp();
    await put('1');
    const [shard] = await shards(streams, arn);
    const it = await iterator(streams, arn, shard?.ShardId as string);
    await engine.control.expireIterators(table);
    expect((await failure(streams.send(new GetRecordsCommand({ ShardIterator: it })))).name).toBe('ExpiredIteratorException');
    const fresh = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string) }));
    expect(sortKeys(fresh.Records ?? [])).toEqual(['1']);
  });

  test("a shard's StartingSequenceNumber is a valid AT_ and AFTER_SEQUENCE_NUMBER position", async () => {
    const { streams, arn, put } = await setUp();
    await put('1');
    const [shard] = await shards(streams, arn);
    const start = shard?.SequenceNumberRange?.StartingSequenceNumber as string;
    for (const type of ['AT_SEQUENCE_NUMBER', 'AFTER_SEQUENCE_NUMBER']) {
      const page = await streams.send(
        new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string, type, start) }),
      );
      expect(sortKeys(page.Records ?? [])).toEqual(['1']);
    }
  });

  test('a garbled iterator is a ValidationException', async () => {
    const { streams } = await setUp();
    expect((await failure(streams.send(new GetRecordsCommand({ ShardIterator: 'not-an-iterator' })))).name).toBe('ValidationException');
  });
});

describe.skipIf(onlyEmbedded)('trimming', () => {
  test('trimmed records are gone: old positions get TrimmedDataAccessException, TRIM_HORIZON starts after them', async () => {
    const { engine, streams, table, arn, put } = await setUp();
    await put('1');
    await put('2');
    const [shard] = await shards(streams, arn);
    const shardId = shard?.ShardId as string;
    const old = await iterator(streams, arn, shardId);
    const first = (await streams.send(new GetRecordsCommand({ ShardIterator: old }))).Records?.[0]?.dynamodb?.SequenceNumber as string;

    expect(await engine.control.trimStream(table)).toBe(2);
    await put('3');

    expect((await failure(streams.send(new GetRecordsCommand({ ShardIterator: old })))).name).toBe('TrimmedDataAccessException');
    expect((await failure(iterator(streams, arn, shardId, 'AT_SEQUENCE_NUMBER', first))).name).toBe('TrimmedDataAccessException');
    const horizon = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shardId) }));
    expect(sortKeys(horizon.Records ?? [])).toEqual(['3']);
  });

  test('a shard trimmed empty and then closed keeps the range of the records it held', async () => {
    const { engine, streams, table, arn, put } = await setUp();
    await put('1');
    await put('2');
    const [shard] = await shards(streams, arn);
    const shardId = shard?.ShardId as string;
    const records = (await streams.send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shardId) }))).Records ?? [];
    const lastSeq = records.at(-1)?.dynamodb?.SequenceNumber as string;
    await engine.control.trimStream(table);
    engine.control.rolloverShard(table);
    const [closed] = await shards(streams, arn);
    expect(BigInt(closed?.SequenceNumberRange?.EndingSequenceNumber as string)).toBeGreaterThanOrEqual(BigInt(lastSeq));
    expect((await failure(iterator(streams, arn, shardId, 'AT_SEQUENCE_NUMBER', lastSeq))).name).toBe('TrimmedDataAccessException');
  });

  test('a trim goes through more records than one batch holds (1,000)', async () => {
    const { engine, client, streams, table, arn } = await setUp();
    for (let batch = 0; batch < 50; batch++) {
      const requests = Array.from({ length: 25 }, (_, i) => ({
        PutRequest: { Item: { pk: { S: 'p' }, sk: { S: String(batch * 25 + i).padStart(4, '0') } } },
      }));
      await client.send(new BatchWriteItemCommand({ RequestItems: { [table]: requests } }));
    }
    expect(await engine.control.trimStream(table)).toBe(1250);
    await client.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'p' }, sk: { S: 'after' } } }));
    const [shard] = await shards(streams, arn);
    const page = await streams.send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string) }));
    expect(sortKeys(page.Records ?? [])).toEqual(['after']);
  });

  test('records older than the retention are trimmed by themselves', async () => {
    const clock = manualClock();
    const { streams, arn, put } = await setUp({ now: clock.now, streamRetentionMs: 1_000 });
    await put('1');
    clock.advance(2_000);
    await put('2');
    const [shard] = await shards(streams, arn);
    await waitFor(
      async () => {
        // The trimmer may run between taking an iterator and using it: then take a new one.
        const page = await streams
          .send(new GetRecordsCommand({ ShardIterator: await iterator(streams, arn, shard?.ShardId as string) }))
          .catch((err: Error) => {
            if (err.name === 'TrimmedDataAccessException') return { Records: undefined };
            throw err;
          });
        return page.Records !== undefined && sortKeys(page.Records).join() === '2';
      },
      { what: 'the old record to be trimmed' },
    );
  });
});
