/** The processes under test, for the benchmarks and the fault harness: each in a process of its own (the load generator must not share their event loop). */

import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { nodeArgs } from '../scripts/process-bundles.ts';

export interface StartedProcess {
  pid: number;
  /** What the process printed on stdout, up to now. */
  output(): string;
  /** How it ended (`exit code 1`, `signal SIGKILL`), or undefined while it runs. */
  ended(): string | undefined;
  /** Resident set size of the process, in MiB. */
  rssMiB(): number;
  /** CPU time the process has used (user + system), in seconds. */
  cpuSeconds(): number;
  /** Sends a message over the IPC channel (started with `ipc`) and waits for the answer with its id. */
  request(message: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Ends it at once, as a crash would. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/** USER_HZ: 100 on Linux everywhere that matters. */
const CLOCK_TICKS = 100;

export interface ServerProcess extends StartedProcess {
  url: string;
  engineEndpoint: string;
  /** The server's /metrics counter of that name. */
  metric(name: string): Promise<number>;
}

function withoutAwsCredentials(env: NodeJS.ProcessEnv) {
  const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, AWS_SESSION_TOKEN: _token, ...rest } = env;
  return rest;
}

/** Starts `<script>` in node (through tsx, or the test run's bundle of it: nodeArgs) and waits until its output matches every pattern. */
export async function startProcess(
  script: string,
  env: Record<string, string>,
  ready: RegExp[],
  args: string[] = [],
  { ipc = false, quiet = false, nodeFlags = [] }: { ipc?: boolean; quiet?: boolean; nodeFlags?: string[] } = {},
): Promise<StartedProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [...(process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []), ...nodeFlags, ...nodeArgs(script), ...args],
    {
      // Without the caller's AWS credentials: an engine would require signatures made with them,
      // and the load generators sign with fake ones (a process given them in `env` gets them).
      env: { ...withoutAwsCredentials(process.env), AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
      stdio: ['ignore', 'pipe', quiet ? 'pipe' : 'inherit', ...(ipc ? (['ipc'] as const) : [])],
    },
  );
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk;
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  let lastRequest = 0;
  const answers = new Map<number, (answer: Record<string, unknown>) => void>();
  child.on('message', (answer: Record<string, unknown>) => answers.get(answer.id as number)?.(answer));
  const deadline = Date.now() + 30_000;
  while (!ready.every((pattern) => pattern.test(output))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${script} did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    pid: child.pid as number,
    output: () => output,
    ended: () =>
      child.exitCode !== null ? `exit code ${child.exitCode}` : child.signalCode !== null ? `signal ${child.signalCode}` : undefined,
    rssMiB() {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
      } catch {
        // Not Linux: the process's own figure is not reachable from here.
        return Number.NaN;
      }
    },
    cpuSeconds() {
      try {
        // Fields 14 and 15 of /proc/<pid>/stat, after the command's closing parenthesis.
        const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
        return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
      } catch {
        return Number.NaN;
      }
    },
    request(message) {
      const id = ++lastRequest;
      return new Promise((resolve, reject) => {
        answers.set(id, (answer) => {
          answers.delete(id);
          if (answer.ok) resolve(answer);
          else reject(new Error(String(answer.error)));
        });
        child.send?.({ ...message, id });
      });
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A Runplane server with its embedded engine, in memory; `quiet`, its log is kept (output()), not printed. */
export async function startServerProcess(env: Record<string, string> = {}, { quiet = false } = {}): Promise<ServerProcess> {
  const up = /Runplane is up: (\S+)/;
  const engine = /embedded engine on (\S+)/;
  // The load generator is one address holding thousands of connections: the per-client caps would measure themselves.
  const uncapped = {
    RUNPLANE_MAX_CONNECTIONS_PER_ADDRESS: '0',
    RUNPLANE_MAX_CONNECTIONS_PER_TENANT: '1000000',
    RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT: '1000000',
  };
  // Idle connections kept longer than the load generator's longest pause: a busy load generator
  // fires its agent's idle timer late, and a request sent on a connection the server is closing
  // is reset, whether or not the server read it (tests do the same, test/support/server.ts).
  const keptAlive = { RUNPLANE_KEEP_ALIVE_SECONDS: '60' };
  const child = await startProcess(
    'src/main.ts',
    // The engine's port: benchmarks read and write the table beside the server.
    { PORT: '0', RUNPLANE_IN_MEMORY: 'true', RUNPLANE_GRAPHIQL: 'false', RUNPLANE_ENGINE_PORT: '0', ...uncapped, ...keptAlive, ...env },
    [up, engine],
    [],
    { quiet },
  );
  const url = up.exec(child.output())?.[1] as string;
  return {
    ...child,
    url,
    engineEndpoint: engine.exec(child.output())?.[1] as string,
    async metric(name: string) {
      const text = await (await fetch(new URL('/metrics', url))).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      if (!line) throw new Error(`no ${name} in /metrics`);
      return Number(line.split(' ')[1]);
    },
  };
}
