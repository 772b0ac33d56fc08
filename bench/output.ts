/**
 * Live output: one stream written at 200 tokens a second with 100 subscribers (token to
 * subscriber latency, table writes a second, server CPU), against the same tokens through
 * appendEvent, one event per token (the baseline: what streaming cost before); and catch-up
 * of a 1 MB stream from offset 0 against the SDK's Query of its chunk rows.
 */
import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import WebSocket from 'ws';
import { documentClient, graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { ms, percentile, ratio } from '../harness/stats.ts';
import { until } from './fan-out.ts';
import { type Subscriber, subscribe } from './ws.ts';

const id = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;
const APPEND_OUTPUT = 'mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename ... on OutputChunk { offset } } }';
const APPEND_EVENT = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';
/** A token as a model writes one: a word and its space, about 4 characters (numbered, so it can be timed). */
const token = (n: number) => `${n.toString(36)}~ `;

interface Streamed {
  p50: number;
  p99: number;
  /** Tokens that reached every subscriber, of tokens * subscribers. */
  delivered: number;
  expected: number;
  /** Rows written to the table a second (chunks, or events). */
  tableWritesPerSecond: number;
  tokensPerSecond: number;
  serverCores: number;
}

/**
 * Writes `tokens` due at `perSecond`, each timed from when it was due. Output has one writer
 * (offsets follow on): what came due while a write was out goes in the next one, as the
 * client's writer sends it. Events are sent each at its time, without waiting for the last.
 */
async function paced(
  tokens: number,
  perSecond: number,
  send: (from: number, to: number) => Promise<unknown>,
  sentAt: number[],
  oneWriter: boolean,
) {
  const started = performance.now();
  const due = (n: number) => started + (n * 1000) / perSecond;
  for (let n = 0; n < tokens; n++) sentAt[n] = due(n);
  const sends: Promise<unknown>[] = [];
  for (let next = 0; next < tokens; ) {
    const wait = due(next) - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    let upTo = next + 1;
    while (oneWriter && upTo < tokens && due(upTo) <= performance.now()) upTo++;
    const sent = send(next, upTo);
    if (oneWriter) await sent;
    else sends.push(sent);
    next = upTo;
  }
  await Promise.all(sends);
  return (performance.now() - started) / 1000;
}

async function streamTokens(
  server: ServerProcess,
  how: 'output' | 'events',
  subscribers: number,
  perSecond: number,
  seconds: number,
): Promise<Streamed> {
  const gql = graphqlClient(server.url);
  const runId = id(how);
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'bench', budgetCap: 1 },
  });
  const tokens = perSecond * seconds;
  const sentAt: number[] = [];
  const latencies: number[] = [];
  const got = new Array<number>(subscribers).fill(0);
  const query =
    how === 'output'
      ? 'subscription($runId: ID!) { runOutput(runId: $runId, stream: "llm") { offset text } }'
      : 'subscription($runId: ID!) { runEvents(runId: $runId) { seq payload } }';
  const sockets: Subscriber[] = await Promise.all(
    Array.from({ length: subscribers }, (_, i) =>
      subscribe(
        server.url,
        query,
        { runId },
        (data) => {
          const now = performance.now();
          const texts =
            how === 'output'
              ? (data.runOutput as { text: string }).text.split(' ').filter(Boolean)
              : [String((data.runEvents as { payload: { t: string } }).payload.t).trim()];
          for (const text of texts) {
            const n = Number.parseInt(text.slice(0, -1), 36);
            if (n < tokens && sentAt[n] !== undefined) latencies.push(now - (sentAt[n] as number));
            got[i] = (got[i] as number) + 1;
          }
        },
        (err) => console.error(`output bench: subscriber error: ${String(err)}`),
      ),
    ),
  );
  // The subscriptions are live before the first token (a warm-up one each way).
  let offset = 0;
  const send =
    how === 'output'
      ? async (from: number, to: number) => {
          let text = '';
          for (let n = from; n < to; n++) text += token(n);
          await gql(APPEND_OUTPUT, { input: { runId, stream: 'llm', offset, text } });
          offset += text.length;
        }
      : (from: number) => gql(APPEND_EVENT, { input: { runId, type: 'llm.token', payload: { t: token(from) } } });
  // A warm-up token, numbered past the timed ones.
  await send(tokens + 1, tokens + 2);
  await until(() => got.every((n) => n >= 1), 30_000, 'every subscriber to get the warm-up token');
  got.fill(0);
  latencies.length = 0;
  const rowsBefore = await tableRows(server, runId, how);
  const cpuBefore = server.cpuSeconds();
  const started = performance.now();
  const writing = await paced(tokens, perSecond, send, sentAt, how === 'output');
  await until(() => got.every((n) => n >= tokens), 30_000, 'every subscriber to get every token').catch(() => undefined);
  const elapsed = (performance.now() - started) / 1000;
  const serverCores = (server.cpuSeconds() - cpuBefore) / elapsed;
  if (how === 'output') await gql(APPEND_OUTPUT, { input: { runId, stream: 'llm', offset, text: '', final: true, durable: true } });
  const rows = (await tableRows(server, runId, how)) - rowsBefore;
  for (const socket of sockets) socket.close();
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    delivered: got.reduce((a, b) => a + b, 0),
    expected: tokens * subscribers,
    tableWritesPerSecond: rows / elapsed,
    /** Tokens a second the writer kept up (the target pace is perSecond). */
    tokensPerSecond: tokens / writing,
    serverCores,
  };
}

/** Rows of the run's output (chunks and the stream's row) or events, as the table holds them. */
async function tableRows(server: ServerProcess, runId: string, how: 'output' | 'events') {
  const doc = documentClient(server.engineEndpoint);
  try {
    let count = 0;
    let ExclusiveStartKey: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: 'runplane',
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': `default#run#${runId}`, ':prefix': how === 'output' ? 'out#' : 'evt#' },
          Select: 'COUNT',
          ConsistentRead: true,
          ExclusiveStartKey,
        }),
      );
      count += page.Count ?? 0;
      ExclusiveStartKey = page.LastEvaluatedKey;
    } while (ExclusiveStartKey);
    return count;
  } finally {
    doc.destroy();
  }
}

/** A 1 MB stream read from offset 0 until its final chunk, against the SDK's paginated Query of its chunk rows (median of 5). */
async function catchUpOutput(server: ServerProcess, bytes: number) {
  const gql = graphqlClient(server.url);
  const runId = id('output-catch-up');
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'bench', budgetCap: 1 },
  });
  const piece = 'lorem ipsum dolor sit amet '.repeat(600).slice(0, 16 * 1024);
  let offset = 0;
  for (; offset + piece.length <= bytes; offset += piece.length)
    await gql(APPEND_OUTPUT, { input: { runId, stream: 'llm', offset, text: piece, durable: true } });
  await gql(APPEND_OUTPUT, { input: { runId, stream: 'llm', offset, text: '', final: true, durable: true } });
  const length = offset;

  const api: number[] = [];
  const raw: number[] = [];
  const doc = documentClient(server.engineEndpoint);
  try {
    for (let round = 0; round < 6; round++) {
      // Connected before the clock starts, as the SDK's client is: the catch-up itself is timed.
      const socket = await connected(server.url);
      let started = performance.now();
      let received = 0;
      await new Promise<void>((resolve, reject) => {
        socket.on('message', (raw) => {
          const message = JSON.parse(String(raw)) as { type: string; payload?: { data?: { runOutput: { text: string; final: boolean } } } };
          if (message.type === 'next' && message.payload?.data) {
            received += message.payload.data.runOutput.text.length;
            if (message.payload.data.runOutput.final) resolve();
          } else if (message.type === 'error') reject(new Error(JSON.stringify(message.payload)));
        });
        socket.send(
          JSON.stringify({
            id: '1',
            type: 'subscribe',
            payload: {
              query: 'subscription($runId: ID!) { runOutput(runId: $runId, stream: "llm") { text final } }',
              variables: { runId },
            },
          }),
        );
      });
      socket.close(1000);
      if (received !== length) throw new Error(`output catch-up got ${received} of ${length} characters`);
      // The first round warms both paths up.
      if (round > 0) api.push(performance.now() - started);
      started = performance.now();
      let ExclusiveStartKey: Record<string, unknown> | undefined;
      let text = '';
      do {
        const page = await doc.send(
          new QueryCommand({
            TableName: 'runplane',
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
            ExpressionAttributeValues: { ':pk': `default#run#${runId}`, ':prefix': 'out#llm#' },
            ConsistentRead: true,
            ExclusiveStartKey,
          }),
        );
        for (const item of page.Items ?? []) text += item.text;
        ExclusiveStartKey = page.LastEvaluatedKey;
      } while (ExclusiveStartKey);
      if (text.length !== length) throw new Error(`the SDK's Query read ${text.length} of ${length} characters`);
      if (round > 0) raw.push(performance.now() - started);
    }
  } finally {
    doc.destroy();
  }
  const apiMs = percentile(api, 50);
  const rawMs = percentile(raw, 50);
  return { bytes: length, apiMs, rawMs, ratio: apiMs / rawMs };
}

/** A graphql-ws socket past its connection_ack. */
function connected(url: string) {
  return new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    socket.once('message', (raw) => {
      if ((JSON.parse(String(raw)) as { type: string }).type === 'connection_ack') resolve(socket);
      else reject(new Error(`expected connection_ack, got ${String(raw)}`));
    });
  });
}

export async function outputSection(server: ServerProcess) {
  const subscribers = 100;
  const perSecond = 200;
  const seconds = 10;
  const output = await streamTokens(server, 'output', subscribers, perSecond, seconds);
  const events = await streamTokens(server, 'events', subscribers, perSecond, seconds);
  const catchUp = await catchUpOutput(server, 1024 * 1024);
  const result = { subscribers, tokensPerSecond: perSecond, seconds, output, events, catchUp };
  const rows: [string, string, string, string][] = [
    [
      `output: 1 stream at ${perSecond} tokens/s, ${subscribers} subscribers: token -> subscriber (p50 / p99)`,
      `${ms(output.p50)} / ${ms(output.p99)} (${output.delivered} of ${output.expected}; ${Math.round(output.tokensPerSecond)} tokens/s kept)`,
      `target p99 at most 50 ms; appendEvent per token: ${ms(events.p50)} / ${ms(events.p99)} (${Math.round(events.tokensPerSecond)} tokens/s kept)`,
      `${ratio(output.p99 / 50)} of the target (p99)`,
    ],
    [
      'output: table writes a second',
      `${output.tableWritesPerSecond.toFixed(1)}/s`,
      `target at most 4; appendEvent per token: ${events.tableWritesPerSecond.toFixed(0)}/s`,
      `${ratio(output.tableWritesPerSecond / events.tableWritesPerSecond)} of appendEvent's`,
    ],
    [
      'output: server CPU (cores, the writes and the fan-out)',
      output.serverCores.toFixed(2),
      `appendEvent per token: ${events.serverCores.toFixed(2)}`,
      ratio(output.serverCores / events.serverCores),
    ],
    [
      `output catch-up: runOutput from 0 of a ${(catchUp.bytes / 2 ** 20).toFixed(1)} MB stream to its final chunk (median of 5)`,
      ms(catchUp.apiMs),
      `SDK paginated Query of its chunks: ${ms(catchUp.rawMs)}`,
      `${ratio(catchUp.ratio)} (target at most 1.3x)`,
    ],
  ];
  return { rows, result };
}
