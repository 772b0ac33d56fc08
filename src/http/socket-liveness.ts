/**
 * Whether a WebSocket's client is still there and reading, judged by what it takes, not by what
 * it sends. Every interval each socket is pinged with a payload of its own and cut (1006) if the
 * pong for the previous ping has not come back: that pong waits behind every frame the client
 * has not read, so a client that stopped reading looks like one that is gone. A pong the client
 * sends unasked, or for another ping, proves nothing and is not counted (graphql-ws's own
 * keepalive takes any pong, so a client that never reads could keep its socket, and everything
 * queued on it, forever by sending pongs).
 *
 * One timer for every socket: an idle subscriber holds no timer of its own.
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { WebSocket, WebSocketServer } from 'ws';

export function keepSocketsHonest(server: WebSocketServer, intervalMs: number) {
  /** The payload of the ping each socket has yet to answer. */
  const awaited = new WeakMap<WebSocket, Buffer>();
  server.on('connection', (socket: WebSocket) => {
    socket.on('pong', (data: Buffer) => {
      const expected = awaited.get(socket);
      if (expected?.equals(data)) awaited.delete(socket);
    });
  });
  const timer = setInterval(() => {
    for (const socket of server.clients) {
      if (socket.readyState !== socket.OPEN) continue;
      if (awaited.has(socket)) {
        socket.terminate();
        continue;
      }
      const payload = randomBytes(8);
      awaited.set(socket, payload);
      socket.ping(payload);
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Whether a socket leaves more unread than `maxUnsentBytes` (frames it was sent and has not
 * taken): asked while it asks for more, so a client that sends operations without reading
 * their answers is cut before it makes the server hold more than that.
 */
export const leavesTooMuchUnread = (socket: WebSocket, maxUnsentBytes: number) => socket.bufferedAmount > maxUnsentBytes;

/**
 * Resolves once `socket` leaves at most `maxUnsentBytes` unread, or is no longer open: woken by
 * its TCP socket draining, and looking again every second in case a drain came unannounced.
 */
export async function waitForRoom(socket: WebSocket, raw: Socket, maxUnsentBytes: number) {
  while (socket.readyState === socket.OPEN && leavesTooMuchUnread(socket, maxUnsentBytes)) {
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        raw.off('drain', done);
        raw.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, 1_000);
      raw.once('drain', done);
      raw.once('close', done);
    });
  }
}
