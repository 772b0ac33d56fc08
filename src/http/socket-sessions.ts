/**
 * What a WebSocket holds once its key is accepted (its connection, its place among the
 * tenant's, its subscriptions' places), and the wait of a socket that leaves too much unread.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import type { ConnectionSlot, Release } from './admission.ts';
import type { Served } from './principals.ts';
import { leavesTooMuchUnread, waitForRoom } from './socket-liveness.ts';

/** Messages of one socket waiting for it to take what it was sent; one more means it is not reading, and it is cut. */
export const MAX_MESSAGES_WAITING = 16;

/** What graphql-ws hands every hook beside its context: the socket and the request that opened it. */
export type Extra = { socket: WebSocket; request: IncomingMessage };

export interface SocketSession {
  connection: Served['connection'];
  slot: ConnectionSlot;
  /** Each admitted subscription's place (caps per connection and tenant), by operation id, until it ends. */
  places: Map<string, Release>;
  /** Queries and mutations executing now (their answers are in no buffer yet). */
  executing: number;
  /** Messages waiting for the client to take what it was sent. */
  waiting: number;
}

/** @param maxUnsentBytes what a socket may leave unread before what it asks for waits */
export function socketSessions(maxUnsentBytes: number) {
  const sessionsBySocket = new WeakMap<WebSocket, SocketSession>();
  return {
    get: (socket: WebSocket) => sessionsBySocket.get(socket),
    set: (socket: WebSocket, session: SocketSession) => void sessionsBySocket.set(socket, session),

    /** Gives operation `id`'s place back, once (graphql-ws may end an operation by more than one path). */
    giveBack(socket: WebSocket, id: string) {
      const places = sessionsBySocket.get(socket)?.places;
      const release = places?.get(id);
      if (!release) return;
      places?.delete(id);
      release();
    },

    /** Waits until the socket has room for more; false when it was cut (or closed) meanwhile. */
    async untilRoom(socket: WebSocket, raw: Socket, session: SocketSession) {
      if (!leavesTooMuchUnread(socket, maxUnsentBytes)) return true;
      if (session.waiting >= MAX_MESSAGES_WAITING) {
        socket.terminate();
        return false;
      }
      session.waiting++;
      try {
        await waitForRoom(socket, raw, maxUnsentBytes);
      } finally {
        session.waiting--;
      }
      return socket.readyState === socket.OPEN;
    },
  };
}

export type SocketSessions = ReturnType<typeof socketSessions>;
