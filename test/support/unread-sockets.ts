/**
 * WebSockets that stop reading with many subscriptions on them, for the tests of what an unread
 * connection costs a server: opened and paused before they subscribe, read again on demand,
 * cut (never closed: a paused socket would not take the close handshake) however a test ends.
 */
import { type RawSocket, rawSocket } from './raw-ws.ts';

export class UnreadSockets {
  private readonly opened: RawSocket[] = [];

  constructor(
    private readonly url: () => string,
    private readonly key: string,
  ) {}

  /** `count` sockets of the key's tenant, reading nothing from the server once open (the kernel's buffers fill, then the server's). */
  async open(count: number) {
    const sockets: RawSocket[] = [];
    for (let i = 0; i < count; i++) {
      const socket = await rawSocket(this.url(), { connectionParams: { authorization: `Bearer ${this.key}` }, keepUnder: 0 });
      socket.pause();
      sockets.push(socket);
    }
    this.opened.push(...sockets);
    return sockets;
  }

  /** Cuts every socket opened so far. */
  cutAll() {
    for (const socket of this.opened.splice(0)) socket.socket.terminate();
  }
}

/** Hands `take` each `next` frame's `field` as it comes, with its operation's id (parsed here: the socket keeps none). */
export function onNext<T>(socket: RawSocket, field: string, take: (id: string, value: T) => void) {
  socket.socket.on('message', (data: Buffer) => {
    const frame = JSON.parse(data.toString()) as { id: string; type: string; payload?: { data?: Record<string, T> } };
    const value = frame.payload?.data?.[field];
    if (frame.type === 'next' && value !== undefined) take(frame.id, value);
  });
}
