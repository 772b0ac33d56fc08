/**
 * A real redis-server of the test file's own, on a free loopback port, without persistence:
 * stopping it loses what it held, as a crashed cache would. Where no redis-server is on PATH
 * the tests that need one skip with the reason printed, unless RUNPLANE_REQUIRE_REDIS (set by
 * .ci/run) demands it.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { startRedisProcess } from '../../harness/redis.ts';
import { freePort } from './ports.ts';

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
  const redis = await startRedisProcess(port);
  return { ...redis, port, [Symbol.asyncDispose]: redis.kill };
}

/**
 * A redis-server for the whole test file: started before its tests (where there is one) and
 * killed after them. What it returns stands for that server from the first test on.
 */
export function redisForFile(): TestRedis {
  let started: TestRedis | undefined;
  beforeAll(async () => {
    if (!noRedis) started = await startRedis();
  });
  afterAll(async () => started?.kill());
  const current = () => {
    if (!started) throw new Error(noRedis ? 'no redis-server on PATH' : 'the Redis of this file is started before its tests');
    return started;
  };
  return {
    get url() {
      return current().url;
    },
    get port() {
      return current().port;
    },
    kill: () => current().kill(),
    start: () => current().start(),
    pause: () => current().pause(),
    resume: () => current().resume(),
    [Symbol.asyncDispose]: () => current().kill(),
  };
}
