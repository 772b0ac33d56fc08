/** The engine's HTTP listener: one port, kept-alive connections, a clean close. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export async function listen(port: number, host: string, handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer({ keepAliveTimeout: 60_000 }, handle);
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    endpoint: `http://${shownHost}:${address.port}`,
    port: address.port,
    /** Stops accepting connections and closes idle ones; resolves once the server is closed. */
    stopListening() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      return closed;
    },
    /** Ends every connection still open (after the requests in flight were answered). */
    dropConnections() {
      for (const socket of sockets) socket.destroy();
    },
  };
}
