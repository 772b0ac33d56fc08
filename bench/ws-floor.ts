/**
 * The floors for fan-out: a bare `ws` server (no GraphQL, no Runplane) in a process of its
 * own, broadcasting frames of the same shape at the same pace to the same number of
 * subscribers. What Runplane adds on top of this is its own cost; the rest is the sockets'.
 *
 * The second floor is the same broadcast behind a store: each event comes from the load
 * generator as an HTTP post, is written to the embedded engine by the SDK (one conditional
 * PutItem, through the in-process client Runplane uses) and then broadcast. It does what
 * Runplane's fan-out does less GraphQL and Runplane's own code, so what lies between it and
 * Runplane is Runplane's; what lies between it and the bare broadcast is the engine's and
 * the SDK's work on the same core.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { startEngine } from '@runplane/engine';
import { WebSocket, WebSocketServer } from 'ws';
import { graphqlClient } from '../harness/clients.ts';
import { type StartedProcess, startProcess } from '../harness/processes.ts';
import { percentile } from '../harness/stats.ts';
import { createClients } from '../src/table/client.ts';
import { ensureTable } from '../src/table/ensure.ts';
import { paced, until } from './fan-out.ts';

/** What graphql-ws sends for runEvents { seq payload }, serialized per client as a server would. */
const frame = (seq: number, sentAt: number) =>
  JSON.stringify({ id: '1', type: 'next', payload: { data: { runEvents: { seq, payload: { sentAt } } } } });

/** Run as a process: `tsx bench/ws-floor.ts serve`. */
function serve() {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  wss.on('listening', () => console.log(`bare ws on ${(wss.address() as { port: number }).port}`));
  wss.on('connection', (socket) =>
    socket.on('message', (raw) => {
      const [command, rate, count] = String(raw).split(' ');
      if (command !== 'go') return;
      let seq = 0;
      const started = performance.now();
      const tick = () => {
        seq++;
        // The event's time, once: a delivery is timed from the event, as Runplane's are from the
        // append, so the later sockets of a broadcast count the wait behind the earlier ones.
        const sentAt = Date.now();
        for (const client of wss.clients) client.send(frame(seq, sentAt));
        if (seq < Number(count)) setTimeout(tick, Math.max(0, started + (seq * 1000) / Number(rate) - performance.now()));
      };
      tick();
    }),
  );
}

/** Run as a process: `tsx bench/ws-floor.ts serve-stored`. */
async function serveStored() {
  const engine = await startEngine({ port: 0 });
  const clients = createClients({
    region: 'us-east-1',
    credentials: { accessKeyId: 'floor', secretAccessKey: 'floor' },
    endpoint: engine.endpoint,
    inProcess: engine.answer,
  });
  await ensureTable(clients.dynamo, 'floor', { create: true });
  const http = createServer();
  // As Runplane's bench servers keep them (harness/processes.ts).
  http.keepAliveTimeout = 60_000;
  const wss = new WebSocketServer({ server: http });
  let seq = 0;
  http.on('request', (request: IncomingMessage, response: ServerResponse) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk) => {
      body += chunk;
    });
    request.on('end', async () => {
      // Posted as graphqlClient posts an append (the load generator's client is the same).
      const { sentAt } = (JSON.parse(body) as { variables: { sentAt: number } }).variables;
      const at = ++seq;
      try {
        await clients.doc.send(
          new PutCommand({
            TableName: 'floor',
            Item: { pk: 'default#run#floor', sk: `evt#${String(at).padStart(12, '0')}`, type: 'step', payload: { sentAt } },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
      } catch (err) {
        // graphqlClient rejects on errors: the measurement stops with the reason.
        response.end(JSON.stringify({ errors: [{ message: String(err) }] }));
        return;
      }
      for (const client of wss.clients) client.send(frame(at, sentAt));
      response.end(JSON.stringify({ data: { seq: at } }));
    });
  });
  http.listen(0, '127.0.0.1', () => console.log(`stored ws on ${(http.address() as { port: number }).port}`));
}

async function connect(port: string | undefined, subscribers: number, latency: (sentAt: number) => number) {
  const sockets: WebSocket[] = [];
  const latencies: number[] = [];
  for (let i = 0; i < subscribers; i++) {
    const socket = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    socket.on('message', (raw) => {
      const message = JSON.parse(String(raw)) as { payload: { data: { runEvents: { payload: { sentAt: number } } } } };
      latencies.push(latency(message.payload.data.runEvents.payload.sentAt));
    });
    sockets.push(socket);
  }
  return { sockets, latencies };
}

/**
 * Warms up, drives the events, waits for every frame and reads the figures (the server's CPU
 * from the first event to the last frame); closes the sockets however it ends.
 */
async function measure(
  server: StartedProcess,
  { sockets, latencies }: Awaited<ReturnType<typeof connect>>,
  expected: number,
  { warm, drive }: { warm?: () => Promise<void>; drive: () => Promise<void> },
) {
  try {
    await warm?.();
    const cpuBefore = server.cpuSeconds();
    const started = performance.now();
    await drive();
    await until(() => latencies.length >= expected, 60_000, 'every frame of the floor');
    const elapsed = (performance.now() - started) / 1000;
    return {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      serverCores: (server.cpuSeconds() - cpuBefore) / elapsed,
    };
  } finally {
    for (const socket of sockets) socket.close();
  }
}

/** Runs `floor` against the floor server started by `serve` (stopped however it ends). */
async function withFloor<T>(serve: string, ready: RegExp, floor: (server: StartedProcess, port: string | undefined) => Promise<T>) {
  const server = await startProcess('bench/ws-floor.ts', {}, [ready], [serve], { quiet: true });
  try {
    return await floor(server, ready.exec(server.output())?.[1]);
  } finally {
    await server.stop();
  }
}

export const wsFloor = (subscribers: number, eventsPerSecond: number, seconds: number) =>
  withFloor('serve', /bare ws on (\d+)/, async (server, port) => {
    const connected = await connect(port, subscribers, (sentAt) => Date.now() - sentAt);
    const events = eventsPerSecond * seconds;
    return measure(server, connected, subscribers * events, {
      // A second at the pace, untimed, as fan-out.ts warms Runplane's server.
      warm: async () => {
        connected.sockets[0]?.send(`go ${eventsPerSecond} ${eventsPerSecond}`);
        await until(() => connected.latencies.length >= subscribers * eventsPerSecond, 60_000, 'the warm-up frames');
        connected.latencies.length = 0;
      },
      drive: async () => connected.sockets[0]?.send(`go ${eventsPerSecond} ${events}`),
    });
  });

/** The broadcast behind a store: events posted at the pace, as Runplane's fan-out gets its appends. */
export const storedWsFloor = (subscribers: number, eventsPerSecond: number, seconds: number) =>
  withFloor('serve-stored', /stored ws on (\d+)/, async (server, port) => {
    const gql = graphqlClient(`http://127.0.0.1:${port}/`);
    const post = (sentAt: number) => gql('', { sentAt });
    // Warm (the engine, the SDK and the HTTP path), as Runplane's server is by its subscribers' setup.
    for (let i = 0; i < 500; i++) await post(0);
    // Timed in the load generator's clock, from the post, as fan-out.ts times an append.
    const connected = await connect(port, subscribers, (sentAt) => performance.now() - sentAt);
    const events = eventsPerSecond * seconds;
    return measure(server, connected, subscribers * events, {
      // A second at the pace, untimed, as fan-out.ts warms Runplane's server.
      warm: async () => {
        await paced(eventsPerSecond, eventsPerSecond, () => post(performance.now()));
        await until(() => connected.latencies.length >= subscribers * eventsPerSecond, 60_000, 'the warm-up frames');
        connected.latencies.length = 0;
      },
      drive: () => paced(events, eventsPerSecond, () => post(performance.now())),
    });
  });

// Ended as a process that exits (so that `--cpu-prof` writes its profile), not killed.
if (process.argv[2]?.startsWith('serve')) process.on('SIGTERM', () => process.exit(0));
if (process.argv[2] === 'serve') serve();
if (process.argv[2] === 'serve-stored') void serveStored();
