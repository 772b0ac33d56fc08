/**
 * A real redis-server of the test file's own, on a free loopback port, without persistence:
 * stopping it loses what it held, as a crashed cache would. Where no redis-server is on PATH
 * the tests that need one skip with the reason printed, unless RUNPLANE_REQUIRE_REDIS (set by
 * .ci/run) demands it.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { freePort } from './ports.ts';
import { waitFor } from './wait.ts';

const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
const available = found.status === 0;
if (!available && process.env.RUNPLANE_REQUIRE_REDIS) {
  throw new Error('RUNPLANE_REQUIRE_REDIS is set but no redis-server is on PATH (apt-get install redis-server)');
}
if (!available) console.warn('skipping the Redis tests: no redis-server on PATH (set RUNPLANE_REQUIRE_REDIS=1 to fail instead)');

/** True when the tests needing Redis must skip. */
export const noRedis = !available;

export interface TestRedis {
  url: string;
  port: number;
  /** Stops it (SIGKILL: whatever it held is gone); start() brings up an empty one on the same port. */
  kill(): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT: it holds every connection open and answers nothing meanwhile. */
  pause(): void;
  resume(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> = Promise.resolve();
  const start = async () => {
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    let output = '';
    proc.stdout?.on('data', (chunk) => {
      output += chunk;
    });
    exited = new Promise((resolve) => proc.on('exit', resolve));
    await waitFor(() => /Ready to accept connections/.test(output) || proc.exitCode !== null, {
      timeoutMs: 15_000,
      what: 'redis-server to start',
    });
    if (proc.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
  };
  const kill = async () => {
    child?.kill('SIGCONT');
    child?.kill('SIGKILL');
    await exited;
    child = undefined;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    start,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    [Symbol.asyncDispose]: kill,
  };
}
