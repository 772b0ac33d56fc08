/** A redis-server process for the replica scenarios and benchmarks: no persistence, so a restart starts empty. */
import { type ChildProcess, spawn } from 'node:child_process';

export interface RedisProcess {
  url: string;
  /** SIGKILL: whatever it held is gone. */
  kill(): Promise<void>;
  /** Starts an empty one on the same port. */
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT: it holds every connection open and answers nothing meanwhile. */
  pause(): void;
  resume(): void;
}

export async function startRedisProcess(port: number): Promise<RedisProcess> {
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> = Promise.resolve();
  const start = async () => {
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    exited = new Promise((resolve) => proc.on('exit', resolve));
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 15_000);
      proc.on('error', (err) => {
        clearTimeout(deadline);
        reject(new Error(`redis-server could not be started (${err.message}): is it installed?`));
      });
      proc.stdout?.on('data', (chunk) => {
        output += chunk;
        if (/Ready to accept connections/.test(output)) {
          clearTimeout(deadline);
          resolve();
        }
      });
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async kill() {
      // A paused process is killed all the same; SIGCONT first so it goes at once.
      child?.kill('SIGCONT');
      child?.kill('SIGKILL');
      await exited;
      child = undefined;
    },
    start,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
  };
}
