/** A loopback port nobody listens on right now (for "the server is not up" cases). */
import { type AddressInfo, createServer } from 'node:net';

export function freePort() {
  return new Promise<number>((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}
