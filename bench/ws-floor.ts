/**
 * The floor for fan-out: a bare `ws` server (no GraphQL, no Runplane) in a process of its
 * own, broadcasting frames of the same shape at the same pace to the same number of
 * subscribers. What Runplane adds on top of this is its own cost; the rest is the sockets'.
 */
import { WebSocket, WebSocketServer } from 'ws';
import { until } from './fan-out.ts';
import { startProcess } from './server.ts';
import { percentile } from './stats.ts';

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
        for (const client of wss.clients) {
          // What graphql-ws sends for runEvents { seq payload }, serialized per client as a server would.
          client.send(JSON.stringify({ id: '1', type: 'next', payload: { data: { runEvents: { seq, payload: { sentAt } } } } }));
        }
        if (seq < Number(count)) setTimeout(tick, Math.max(0, started + (seq * 1000) / Number(rate) - performance.now()));
      };
      tick();
    }),
  );
}

export async function wsFloor(subscribers: number, eventsPerSecond: number, seconds: number) {
  const server = await startProcess('bench/ws-floor.ts', {}, [/bare ws on (\d+)/], ['serve']);
  const port = /bare ws on (\d+)/.exec(server.output())?.[1];
  const sockets: WebSocket[] = [];
  const latencies: number[] = [];
  try {
    for (let i = 0; i < subscribers; i++) {
      const socket = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      socket.on('message', (raw) => {
        const message = JSON.parse(String(raw)) as { payload: { data: { runEvents: { payload: { sentAt: number } } } } };
        latencies.push(Date.now() - message.payload.data.runEvents.payload.sentAt);
      });
      sockets.push(socket);
    }
    const events = eventsPerSecond * seconds;
    const cpuBefore = server.cpuSeconds();
    const started = performance.now();
    sockets[0]?.send(`go ${eventsPerSecond} ${events}`);
    await until(() => latencies.length >= subscribers * events, 60_000, 'every bare frame');
    const elapsed = (performance.now() - started) / 1000;
    return {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      serverCores: (server.cpuSeconds() - cpuBefore) / elapsed,
    };
  } finally {
    for (const socket of sockets) socket.close();
    await server.stop();
  }
}

if (process.argv[2] === 'serve') serve();
