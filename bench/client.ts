/**
 * The client's cost: appendEvent through runplane/client against the same request sent raw
 * (one fetch of the same body, the same idempotency key included), and runEvents' catch-up of
 * a long run through the client against a bare graphql-ws subscriber (the server's own
 * catch-up, with nothing on top). Each pair alternates, so both meet the same machine.
 */
import { randomBytes } from 'node:crypto';
import { createRunplane, newIdempotencyKey } from '@runplane/client';
import WebSocket from 'ws';
import { graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';
import { until } from './fan-out.ts';
import { subscribe } from './ws.ts';

/** The fields the client asks of each event. */
const EVENT_FIELDS = 'id runId seq type payload createdAt late missingBefore { from to }';

const APPEND = `mutation AppendEvent($input: AppendEventInput!) {
  appendEvent(input: $input) { __typename ... on Event { seq } } }`;

export interface ClientCost {
  append: { client: Stats; raw: Stats; rawWithoutKey: Stats };
  /** Seconds to the last event, per round (after one warm-up round of each). */
  catchUp: { events: number; clientWs: number[]; bareWs: number[]; clientSse: number[]; bareSse: number[] };
}
interface Stats {
  p50: number;
  p99: number;
}

const stats = (xs: number[]): Stats => ({ p50: percentile(xs, 50), p99: percentile(xs, 99) });

async function timed(into: number[], run: () => Promise<unknown>) {
  const started = performance.now();
  await run();
  into.push(performance.now() - started);
}

export async function clientCost(server: ServerProcess, samples = 400, events = 10_000): Promise<ClientCost> {
  const client = createRunplane({ url: server.url, webSocketImpl: WebSocket });
  const sse = createRunplane({ url: server.url, transport: 'sse' });
  const gql = graphqlClient(server.url);
  const runId = `bench-${randomBytes(4).toString('hex')}`;
  await client.createRun({ id: runId, task: 'client cost', budgetCap: 1 });

  // The same request by hand: one fetch (as the client does), its own key, nothing else.
  const raw = (keyed: boolean) => async () => {
    const input = { runId, type: 'step', payload: { n: 1 }, ...(keyed ? { idempotencyKey: newIdempotencyKey() } : {}) };
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' },
      body: JSON.stringify({ query: APPEND, variables: { input } }),
    });
    const body = (await response.json()) as { data?: { appendEvent: { __typename: string } } };
    if (body.data?.appendEvent.__typename !== 'Event') throw new Error(JSON.stringify(body));
  };
  const throughClient = async () => {
    const answer = await client.appendEvent({ runId, type: 'step', payload: { n: 1 } });
    if (answer.__typename !== 'Event') throw new Error(answer.__typename);
  };
  const paths: [() => Promise<void>, number[]][] = [
    [throughClient, []],
    [raw(true), []],
    [raw(false), []],
  ];
  for (let i = 0; i < 100; i++) for (const [run] of paths) await run();
  for (let i = 0; i < samples; i++) {
    // A different order each round: none always runs first on a warm connection.
    const order = i % 3 === 0 ? paths : i % 3 === 1 ? [...paths].reverse() : [paths[1], paths[0], paths[2]];
    for (const [run, into] of order as typeof paths) await timed(into, run);
  }
  const [clientTimes, rawTimes, plainTimes] = paths.map(([, times]) => times) as [number[], number[], number[]];

  // A long run, written through the API by 64 writers at once.
  const longRun = `bench-long-${randomBytes(4).toString('hex')}`;
  await client.createRun({ id: longRun, task: 'catch-up', budgetCap: 1 });
  let written = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (written < events) {
        written++;
        await gql(APPEND, { input: { runId: longRun, type: 'step', payload: { text: 'a step of about this size' } } });
      }
    }),
  );
  const catchUp = { events, clientWs: [] as number[], bareWs: [] as number[], clientSse: [] as number[], bareSse: [] as number[] };
  const throughRunplane = (which: typeof client) => async () => {
    let last = 0;
    for await (const event of which.runEvents(longRun, { afterSeq: 0 })) {
      if (event.seq !== last + 1) throw new Error(`seq ${event.seq} after ${last}`);
      last = event.seq;
      if (last === events) break;
    }
  };
  const query = `subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { ${EVENT_FIELDS} } }`;
  const bareWs = async () => {
    let last = 0;
    const subscriber = await subscribe(
      server.url,
      query,
      { runId: longRun },
      (data) => {
        last = (data.runEvents as { seq: number }).seq;
      },
      (err) => console.error('bare subscriber:', err),
    );
    await until(() => last >= events, 120_000, `seq ${events}`);
    subscriber.close();
  };
  /** A bare SSE reader: one fetch, frames split and parsed, nothing else. */
  const bareSse = async () => {
    const abort = new AbortController();
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query, variables: { runId: longRun } }),
      signal: abort.signal,
    });
    const decoder = new TextDecoder();
    let buffer = '';
    let last = 0;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      const frames = buffer.split('\n\n');
      buffer = frames.pop() ?? '';
      for (const frame of frames) {
        const data = frame.split('\n').find((line) => line.startsWith('data: '));
        if (data && frame.includes('event: next')) last = JSON.parse(data.slice(6)).data.runEvents.seq;
      }
      if (last >= events) break;
    }
    abort.abort();
  };
  const kinds: [() => Promise<void>, number[]][] = [
    [bareWs, catchUp.bareWs],
    [throughRunplane(client), catchUp.clientWs],
    [bareSse, catchUp.bareSse],
    [throughRunplane(sse), catchUp.clientSse],
  ];
  for (const [run] of kinds) await run();
  for (let round = 0; round < 5; round++) {
    for (const [run, into] of round % 2 ? [...kinds].reverse() : kinds) {
      const started = performance.now();
      await run();
      into.push((performance.now() - started) / 1000);
    }
  }
  await Promise.all([client.close(), sse.close()]);
  return { append: { client: stats(clientTimes), raw: stats(rawTimes), rawWithoutKey: stats(plainTimes) }, catchUp };
}
