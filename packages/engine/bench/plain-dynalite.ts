/** Plain dynalite 4.0.0 on a free port, in memory: the baseline for the engine's own cost. */
import { createRequire } from 'node:module';
import type { AddressInfo, Server } from 'node:net';

const require = createRequire(import.meta.url);
const dynalite = require('dynalite') as (options: { createTableMs: number }) => Server;
const server = dynalite({ createTableMs: 0 });
server.listen(0, '127.0.0.1', () => console.log(`plain dynalite on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
