/**
 * Whether a WebSocket's client is still there and reading, judged by what it takes, not by what
 * it sends. Every interval each socket is pinged with a payload of its own and cut (1006) if the
 * pong for the previous ping has not come back: that pong waits behind every frame the client
 * has not read, so a client that stopped reading looks like one that is gone. A pong the client
 * sends unasked, or for another ping, proves nothing and is not counted (graphql-ws's own
 * keepalive takes any pong, so a client that never reads could keep its socket, and everything
 * queued on it, forever by sending pongs).
 *
 * One timer for every socket: an idle subscriber holds no timer of its own. The sockets take
 * turns, a share of them pinged every tenth of a second (at most 128 turns), each once an
 * interval: after the event loop was held up (past an interval even), the turn that comes first
 * is one whose pings went out an interval before, long answered, not the one whose pongs wait
 * unread behind the hold.
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import type { WebSocket, WebSocketServer } from 'ws';

/** A pong may come this much later for each MiB waiting ahead of it (the ping waits behind them). */
export const BYTES_PER_PING_INTERVAL = 1024 * 1024;
/** What the two kernels' socket buffers may hold ahead of a pong besides (Linux grows them to a few MiB). */
const KERNEL_BUFFERS_BYTES = 8 * 1024 * 1024;

/** How often a share of the sockets is pinged: each interval is cut into turns about this long... */
const TURN_MS = 100;
/** ... and into this many at most (an hour's interval is not 36,000 sets woken every tenth of a second). */
const MAX_TURNS = 128;
/** Turns the ticks may fall behind (the event loop held up) before the missed ones are skipped, not caught up. */
const MAX_TURNS_BEHIND = 10;

/**
 * @param mostUnsentBytes the backlog allowed for at most (more waiting buys no more time: a
 *   socket holding more has to be read faster)
 */
export function keepSocketsHonest(server: WebSocketServer, intervalMs: number, mostUnsentBytes: number) {
  /** The ping each socket has yet to answer: its payload, the intervals it has had and may have. */
  const awaited = new WeakMap<WebSocket, { payload: Buffer; intervals: number; allowed: number }>();
  // Each socket has its turn in the interval: pinging them all at once held the event loop for
  // tens of milliseconds a thousand sockets, every interval, and every event broadcast meanwhile
  // waited behind it. A socket joins the turn with the fewest (however sockets come and go, no
  // turn holds them all).
  const turns = Array.from({ length: Math.min(MAX_TURNS, Math.max(1, Math.round(intervalMs / TURN_MS))) }, () => new Set<WebSocket>());
  server.on('connection', (socket: WebSocket) => {
    const turn = turns.reduce((fewest, t) => (t.size < fewest.size ? t : fewest));
    turn.add(socket);
    socket.once('close', () => turn.delete(socket));
    socket.on('pong', (data: Buffer) => {
      if (awaited.get(socket)?.payload.equals(data)) awaited.delete(socket);
    });
  });

  function ping(sockets: Set<WebSocket>) {
    if (sockets.size === 0) return;
    // Unguessable payloads (a client must not answer a ping before it has read up to it), drawn at once for the turn.
    const random = randomBytes(8 * sockets.size);
    let drawn = 0;
    for (const socket of sockets) {
      if (socket.readyState !== socket.OPEN) continue;
      const waiting = awaited.get(socket);
      if (waiting) {
        if (++waiting.intervals >= waiting.allowed) socket.terminate();
        continue;
      }
      // A ping sent behind a backlog is answered once the client has taken it: an interval for
      // each MiB of it (as it stood when the ping was sent), and for what the kernels' buffers
      // hold besides. One that takes nothing is cut once that is used up.
      const backlog = socket.bufferedAmount;
      const allowed =
        backlog === 0 ? 1 : 1 + Math.ceil((Math.min(backlog, mostUnsentBytes) + KERNEL_BUFFERS_BYTES) / BYTES_PER_PING_INTERVAL);
      const payload = random.subarray(drawn, drawn + 8);
      drawn += 8;
      awaited.set(socket, { payload, intervals: 0, allowed });
      socket.ping(payload);
    }
  }

  // Turns are kept to the clock, not each set from the last one's end: a tick a little late
  // every time (a busy server) would stretch every interval by all of them.
  const step = intervalMs / turns.length;
  let turn = 0;
  let due = performance.now() + step;
  let timer: NodeJS.Timeout;
  const tick = () => {
    ping(turns[turn++ % turns.length] as Set<WebSocket>);
    const now = performance.now();
    due += step;
    // Held up far longer (a long stall): the missed turns wait for their next time.
    if (now - due > MAX_TURNS_BEHIND * step) due = now;
    // A turn already due runs in the next round of the loop, after the pongs that came meanwhile are read.
    timer = setTimeout(tick, Math.max(1, due - now));
    timer.unref();
  };
  timer = setTimeout(tick, step);
  timer.unref();
  return () => clearTimeout(timer);
}

/**
 * Whether a socket leaves more unread than `maxUnsentBytes` (frames it was sent and has not
 * taken): asked while it asks for more, so a client that sends operations without reading
 * their answers is cut before it makes the server hold more than that.
 */
export const leavesTooMuchUnread = (socket: WebSocket, maxUnsentBytes: number) => socket.bufferedAmount > maxUnsentBytes;

/** Per TCP socket, the wait for its next drain (one listener pair however many wait on it). */
const drains = new WeakMap<Socket, Promise<void>>();

/** The socket's next drain or close, or a second, whichever comes first (shared by every waiter). */
function nextDrain(raw: Socket) {
  let next = drains.get(raw);
  if (!next) {
    next = new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        raw.off('drain', done);
        raw.off('close', done);
        drains.delete(raw);
        resolve();
      };
      const timer = setTimeout(done, 1_000);
      raw.once('drain', done);
      raw.once('close', done);
    });
    drains.set(raw, next);
  }
  return next;
}

/**
 * Resolves once `socket` leaves at most `maxUnsentBytes` unread, or is no longer open: woken by
 * its TCP socket draining, and looking again every second in case a drain came unannounced.
 */
export async function waitForRoom(socket: WebSocket, raw: Socket, maxUnsentBytes: number) {
  while (socket.readyState === socket.OPEN && leavesTooMuchUnread(socket, maxUnsentBytes)) await nextDrain(raw);
}
