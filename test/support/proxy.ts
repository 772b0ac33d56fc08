/**
 * A TCP proxy in front of a server, to cut its connections as a network would: `drop()`
 * resets every connection open through it now (new ones are let through).
 */
import { type AddressInfo, createConnection, createServer, type Socket } from 'node:net';

export interface Proxy {
  /** The server's URL, through the proxy. */
  url: string;
  /** Connections cut so far. */
  dropped: number;
  drop(): void;
  /** New connections go to another server from now on (as a load balancer moves on from a dead one). */
  retarget(target: string): void;
  close(): Promise<void>;
}

export async function tcpProxy(target: string): Promise<Proxy> {
  let to = new URL(target);
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: to.hostname, port: Number(to.port) });
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.port = String((server.address() as AddressInfo).port);
  const proxy: Proxy = {
    url: url.toString(),
    dropped: 0,
    retarget(next: string) {
      to = new URL(next);
    },
    drop() {
      for (const socket of open) socket.resetAndDestroy();
      proxy.dropped += open.size;
      open.clear();
    },
    async close() {
      proxy.drop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
