/**
 * What the harness runs against: the engine on its own (data on disk, fault injection over
 * IPC) and two API servers on one table, each a process of its own on a fixed port, so that
 * any of them can be killed and started again where clients expect it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type StartedProcess, startProcess } from '../harness/processes.ts';
import { type RedisProcess, startRedisProcess } from '../harness/redis.ts';
import type { FaultRule } from '../packages/engine/src/faults.ts';

/** The secret the chaos cluster's replicas seal their Redis entries with (a forger does not have it). */
export const CHAOS_REDIS_SECRET = 'the-chaos-cluster-replicas-share-this-secret';

/** Whether a port can be listened on now. */
const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });

/**
 * A free port below the ephemeral range (Linux 32768-60999, macOS 49152-65535): a process
 * restarted on it must find it still free, and the thousands of connections the clients
 * open take their local ports from the ephemeral range.
 */
async function freePort(taken: number[] = []) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (!taken.includes(port) && (await canListen(port))) return port;
  }
  throw new Error('no free port between 20000 and 32000 on 127.0.0.1');
}

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
  /** With Redis (replicas coordinating): kill it and start it again, empty. */
  killRedis(): Promise<void>;
  startRedis(): Promise<void>;
  /** With Redis: a command sent to it as anyone who can reach it could (CONFIG, XADD, XDEL, ...). */
  redisCommand(command: string, ...args: (string | number)[]): Promise<unknown>;
  /** The Redis Stream the replicas fan out through. */
  redisStream: string;
  /** What server `index` printed, and how it ended if it did (a server found not ready says why). */
  serverLog(index: number): string;
  /** The index of the server holding the stream's shard now (by its /metrics), if one does. */
  shardOwner(): Promise<number | undefined>;
  stop(): Promise<void>;
}

/** `env`: settings every API server gets (a scenario's own); `engineArgs`: the engine's own (its throughput model, say). */
export async function startCluster(
  servers = 2,
  env: Record<string, string> = {},
  { redis = false, engineArgs = [] as string[] } = {},
): Promise<Cluster> {
  const dataDir = mkdtempSync(join(tmpdir(), 'runplane-chaos-'));
  const table = 'chaos';
  const ports: number[] = [];
  for (let i = 0; i <= servers + 1; i++) ports.push(await freePort(ports));
  const enginePort = ports.shift() as number;
  const redisPort = ports.pop() as number;
  let redisProcess: RedisProcess | undefined;
  if (redis) {
    redisProcess = await startRedisProcess(redisPort);
    // A short shard lease: a killed owner's shard is taken over within the scenario.
    env = { RUNPLANE_REDIS_URL: redisProcess.url, RUNPLANE_REDIS_SECRET: CHAOS_REDIS_SECRET, RUNPLANE_SHARD_LEASE_SECONDS: '3', ...env };
  }
  const engineEndpoint = `http://127.0.0.1:${enginePort}`;
  let engine: StartedProcess | undefined;
  const running: (StartedProcess | undefined)[] = [];

  const startEngine = async () => {
    engine = await startProcess(
      'packages/engine/src/cli.ts',
      {},
      [/Streams on http/],
      ['--port', String(enginePort), '--data', dataDir, ...engineArgs],
      {
        ipc: true,
        quiet: true,
      },
    );
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
        // Stalled runs found within a second of their claim's end (the run workers' claims last one).
        RUNPLANE_STALL_CHECK_SECONDS: '1',
        ...env,
      },
      [/Runplane is up/],
      [],
      { quiet: true },
    );
  };
  let redisClient: Redis | undefined;
  const redisCommand = async (command: string, ...args: (string | number)[]) => {
    if (!redisProcess) throw new Error('this cluster has no Redis');
    redisClient ??= new Redis(redisProcess.url, { maxRetriesPerRequest: 1 });
    return redisClient.call(command, ...args);
  };
  const control = async (message: Record<string, unknown>) => {
    if (!engine) throw new Error('the engine is not running');
    return engine.request(message);
  };

  await startEngine();
  // All at once: one creates the table, the others find it created (or being created) and wait for it.
  await Promise.all(Array.from({ length: servers }, (_, i) => startServer(i)));
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
    serverLog: (index) => {
      const server = running[index];
      if (!server) return 'not running';
      return `${server.ended() ?? 'running'}; its last output:\n${server.output().slice(-4_000)}`;
    },
    killRedis: async () => redisProcess?.kill(),
    startRedis: async () => redisProcess?.start(),
    redisCommand,
    redisStream: `runplane:${table}:changes`,
    async shardOwner() {
      const owned = await Promise.all(
        ports.map((port) =>
          fetch(`http://127.0.0.1:${port}/metrics`)
            .then((r) => r.text())
            .then((text) => Number(/^runplane_stream_shards_owned (\d+)/m.exec(text)?.[1] ?? 0))
            .catch(() => 0),
        ),
      );
      const index = owned.findIndex((n) => n > 0);
      return index < 0 ? undefined : index;
    },
    async stop() {
      await Promise.all(running.map((server) => server?.stop()));
      await engine?.stop();
      redisClient?.disconnect();
      await redisProcess?.kill();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
