/** The server under test, in a process of its own (the load generator must not share its event loop). */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface ServerProcess {
  url: string;
  engineEndpoint: string;
  pid: number;
  /** Resident set size of the server process, in MiB. */
  rssMiB(): number;
  stop(): Promise<void>;
}

export async function startServerProcess(env: Record<string, string> = {}): Promise<ServerProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      PORT: '0',
      RUNPLANE_IN_MEMORY: 'true',
      RUNPLANE_GRAPHIQL: 'false',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  const deadline = Date.now() + 30_000;
  while (!/Runplane is up: (\S+)/.test(output) || !/embedded engine on (\S+)/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const url = /Runplane is up: (\S+)/.exec(output)?.[1] as string;
  const engineEndpoint = /embedded engine on (\S+)/.exec(output)?.[1] as string;
  return {
    url,
    engineEndpoint,
    pid: child.pid as number,
    rssMiB() {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
      } catch {
        return Number.NaN;
      }
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
