/**
 * What the harness runs against: the engine on its own (data on disk, fault injection over
 * IPC) and two API servers on one table, each a process of its own on a fixed port, so that
 * any of them can be killed and started again where clients expect it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BenchProcess, startProcess } from '../bench/server.ts';
import type { FaultRule } from '../src/engine/faults.ts';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

export interface Cluster {
  table: string;
  engineEndpoint: string;
  /** The servers' GraphQL URLs (stable across restarts). */
  urls: string[];
  inject(rule: FaultRule): Promise<number>;
  /** Removes a fault; how many calls it affected. */
  remove(fault: number): Promise<number>;
  expireIterators(): Promise<void>;
  rolloverShard(): Promise<void>;
  killEngine(): Promise<void>;
  startEngine(): Promise<void>;
  killServer(index: number): Promise<void>;
  startServer(index: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startCluster(servers = 2): Promise<Cluster> {
  const dataDir = mkdtempSync(join(tmpdir(), 'runplane-chaos-'));
  const table = 'chaos';
  const enginePort = await freePort();
  const engineEndpoint = `http://127.0.0.1:${enginePort}`;
  const ports = await Promise.all(Array.from({ length: servers }, freePort));
  let engine: BenchProcess | undefined;
  const running: (BenchProcess | undefined)[] = [];

  const startEngine = async () => {
    engine = await startProcess('src/engine/cli.ts', {}, [/Streams on http/], ['--port', String(enginePort), '--data', dataDir], {
      ipc: true,
      quiet: true,
    });
  };
  const startServer = async (index: number) => {
    running[index] = await startProcess(
      'src/main.ts',
      {
        PORT: String(ports[index]),
        AWS_ENDPOINT_URL_DYNAMODB: engineEndpoint,
        RUNPLANE_TABLE: table,
        RUNPLANE_GRAPHIQL: 'false',
        NODE_ENV: 'development',
      },
      [/Runplane is up/],
      [],
      { quiet: true },
    );
  };
  const control = async (message: Record<string, unknown>) => {
    if (!engine) throw new Error('the engine is not running');
    return engine.request(message);
  };

  await startEngine();
  // One at a time: the first creates the table.
  for (let i = 0; i < servers; i++) await startServer(i);
  return {
    table,
    engineEndpoint,
    urls: ports.map((port) => `http://127.0.0.1:${port}/graphql`),
    inject: async (rule) => (await control({ op: 'inject', rule })).fault as number,
    remove: async (fault) => (await control({ op: 'remove', fault })).hits as number,
    expireIterators: async () => void (await control({ op: 'expireIterators', table })),
    rolloverShard: async () => void (await control({ op: 'rolloverShard', table })),
    killEngine: async () => {
      await engine?.kill();
      engine = undefined;
    },
    startEngine,
    killServer: async (index) => {
      await running[index]?.kill();
      running[index] = undefined;
    },
    startServer,
    async stop() {
      await Promise.all(running.map((server) => server?.stop()));
      await engine?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
