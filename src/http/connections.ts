/**
 * Deadlines and caps at the socket: a request's headers and body must arrive in time, an idle
 * keep-alive connection is closed, and one client address holds a bounded number of
 * connections (a refused one gets a 429 and is closed before anything is read from it).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { codes } from '../schema/error-codes.ts';

/** What one client may hold open, and how long it may take to send (configured: RUNPLANE_MAX_*, RUNPLANE_*_SECONDS). */
export interface ConnectionLimits {
  readonly maxSubscriptionsPerConnection: number;
  readonly maxSubscriptionsPerTenant: number;
  /** WebSockets and SSE streams of one tenant. */
  readonly maxConnectionsPerTenant: number;
  /** TCP connections from one client address; 0: no cap (behind a proxy, every client has its address). */
  readonly maxConnectionsPerAddress: number;
  /** Subscription setups a second, per WebSocket and per client address over SSE (bursts of twice that). */
  readonly subscribeRate: number;
  /** Bytes of events queued and frames unsent that one connection may hold before its feeds read from the table instead. */
  readonly sendBufferBytes: number;
  /** A request's headers and body must arrive within this. */
  readonly requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number;
  /**
   * An HTTP connection on which nothing moves for this long (the client takes nothing of its
   * answer or its SSE stream, and sends nothing) is cut, and what was held for it freed.
   */
  readonly sendTimeoutMs: number;
  /** A WebSocket must send connection_init within this. */
  readonly connectionInitTimeoutMs: number;
  /**
   * A WebSocket is pinged this often and cut if it has not answered by the next ping: a peer
   * gone, or one that has read nothing for that long (its pong waits behind unread frames).
   */
  readonly pingIntervalMs: number;
}

export function guardConnections(server: Server, limits: ConnectionLimits) {
  server.requestTimeout = limits.requestTimeoutMs;
  server.headersTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const sockets = new Set<Socket>();
  const byAddress = new Map<string, number>();
  const cap = limits.maxConnectionsPerAddress;
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const open = byAddress.get(address) ?? 0;
    if (cap > 0 && open >= cap) {
      const body = JSON.stringify({
        errors: [
          {
            message: `Too many open connections from this address (limit ${cap}, RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS)`,
            extensions: { code: codes.limitExceeded },
          },
        ],
      });
      socket.end(
        `HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      socket.destroySoon();
      return;
    }
    byAddress.set(address, open + 1);
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left <= 0) byAddress.delete(address);
      else byAddress.set(address, left);
    });
  });
  const stopWatching = cutStalledReaders(sockets, limits.sendTimeoutMs);
  return {
    /** Open sockets (to cut them at the end of a graceful stop). */
    sockets,
    openFrom: (address: string) => byAddress.get(address) ?? 0,
    stop: stopWatching,
  };
}

/** What waits for a client gets `timeoutMs` for each this many bytes of it (at least once). */
export const BYTES_PER_TIMEOUT = 1024 * 1024;

/**
 * Cuts a connection whose client has not taken what waits for it in `timeoutMs` for each MiB
 * of it (one `timeoutMs` at least): bytes sit in the socket's buffer and no write of them
 * completed meanwhile. (Node tells when a write completes, not how much of one went out: a
 * single large answer shows no progress until it is all taken, hence the allowance by size.) Not Node's
 * socket timeout: yoga turns that off for every streamed answer, and it would also cut a quiet
 * stream that holds nothing. A connection that holds nothing unsent is never cut here.
 */
function cutStalledReaders(sockets: Set<Socket>, timeoutMs: number) {
  const waiting = new WeakMap<Socket, { sent: number; since: number; allowedMs: number }>();
  const timer = setInterval(
    () => {
      const now = performance.now();
      for (const socket of sockets) {
        if (socket.writableLength === 0) {
          waiting.delete(socket);
          continue;
        }
        // bytesWritten counts what is still buffered too: what went out is the difference.
        const sent = socket.bytesWritten - socket.writableLength;
        const seen = waiting.get(socket);
        if (!seen || seen.sent !== sent)
          waiting.set(socket, { sent, since: now, allowedMs: timeoutMs * Math.max(1, socket.writableLength / BYTES_PER_TIMEOUT) });
        else if (now - seen.since >= seen.allowedMs) socket.destroy();
      }
    },
    Math.max(50, Math.min(1_000, timeoutMs / 4)),
  );
  timer.unref();
  return () => clearInterval(timer);
}
