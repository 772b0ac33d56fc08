/**
 * The engine's own cost: the same raw SDK operations against the embedded engine (with its
 * stream, transaction and TTL layer, the table's stream on) and against plain dynalite (no
 * stream), each in a process of its own, over HTTP, with the same concurrency.
 */
import { randomBytes } from 'node:crypto';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { documentClient } from '../../../harness/clients.ts';
import { type StartedProcess, startProcess } from '../../../harness/processes.ts';

export interface EngineCost {
  operation: string;
  engineOpsPerSecond: number;
  dynaliteOpsPerSecond: number;
  /** engine / dynalite: 1 means no overhead. */
  ratio: number;
}

type Doc = ReturnType<typeof documentClient>;

const TABLE = 'bench';
const CONCURRENCY = 8;

async function throughput(durationMs: number, op: (n: number) => Promise<unknown>) {
  let done = 0;
  let n = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        await op(n++);
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

const operations: Array<[string, (doc: Doc, prefix: string) => (n: number) => Promise<unknown>]> = [
  [
    'PutItem',
    (doc, p) => (n) => doc.send(new PutCommand({ TableName: TABLE, Item: { pk: `${p}#new${n}`, sk: 'a', body: 'x'.repeat(200) } })),
  ],
  [
    'GetItem',
    (doc, p) => (n) => doc.send(new GetCommand({ TableName: TABLE, Key: { pk: `${p}#${n % 500}`, sk: 'a' }, ConsistentRead: true })),
  ],
  [
    'UpdateItem (conditional)',
    (doc, p) => (n) =>
      doc.send(
        new UpdateCommand({
          TableName: TABLE,
          Key: { pk: `${p}#${n % 500}`, sk: 'a' },
          UpdateExpression: 'ADD hits :one',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':one': 1 },
        }),
      ),
  ],
  [
    'Query (20 items)',
    (doc, p) => (n) =>
      doc.send(
        new QueryCommand({ TableName: TABLE, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `${p}#q${n % 5}` } }),
      ),
  ],
];

async function prepare(doc: Doc, withStream: boolean) {
  await doc.send(
    new CreateTableCommand({
      TableName: TABLE,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      ...(withStream ? { StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } } : {}),
    }),
  );
}

async function seed(doc: Doc, prefix: string) {
  for (let q = 0; q < 5; q++)
    for (let i = 0; i < 20; i++)
      await doc.send(new PutCommand({ TableName: TABLE, Item: { pk: `${prefix}#q${q}`, sk: String(i).padStart(3, '0'), body: 'y' } }));
  for (let i = 0; i < 500; i++) await doc.send(new PutCommand({ TableName: TABLE, Item: { pk: `${prefix}#${i}`, sk: 'a', body: 'z' } }));
}

export async function engineCost(durationMs: number) {
  const processes: StartedProcess[] = [];
  try {
    const engine = await startProcess('packages/engine/src/cli.ts', {}, [/on (http:\S+)/], ['--port', '0', '--in-memory']);
    processes.push(engine);
    const plain = await startProcess('packages/engine/bench/plain-dynalite.ts', {}, [/on (http:\S+)/]);
    processes.push(plain);
    const endpoint = (p: StartedProcess) => /on (http:\S+)/.exec(p.output())?.[1] as string;
    const ours = documentClient(endpoint(engine));
    const theirs = documentClient(endpoint(plain));
    const prefix = randomBytes(3).toString('hex');
    await prepare(ours, true);
    await prepare(theirs, false);
    await seed(ours, prefix);
    await seed(theirs, prefix);
    const rows: EngineCost[] = [];
    for (const [name, make] of operations) {
      const a = make(ours, prefix);
      const b = make(theirs, prefix);
      await throughput(300, a);
      await throughput(300, b);
      // A, B, B, A: both meet the same load on this shared machine.
      const half = durationMs / 2;
      const engineOps = await throughput(half, a);
      const dynaliteOps = ((await throughput(half, b)) + (await throughput(half, b))) / 2;
      const engineAvg = (engineOps + (await throughput(half, a))) / 2;
      rows.push({ operation: name, engineOpsPerSecond: engineAvg, dynaliteOpsPerSecond: dynaliteOps, ratio: engineAvg / dynaliteOps });
    }
    // A transaction only the engine has (dynalite 4 has none): reported alone.
    const transactOpsPerSecond = await throughput(durationMs, (n) =>
      ours.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: TABLE, Item: { pk: `${prefix}#t${n}`, sk: 'a' }, ConditionExpression: 'attribute_not_exists(pk)' } },
            { Put: { TableName: TABLE, Item: { pk: `${prefix}#t${n}`, sk: 'b' }, ConditionExpression: 'attribute_not_exists(pk)' } },
          ],
        }),
      ),
    );
    ours.destroy();
    theirs.destroy();
    return { rows, transactOpsPerSecond };
  } finally {
    await Promise.all(processes.map((p) => p.stop()));
  }
}
