/** `src/main.ts` as `npm start` runs it: a child process on a random port, its output kept for asserting. */
import { type ChildProcess, spawn } from 'node:child_process';
import { nodeArgs } from '../../scripts/process-bundles.ts';

export interface MainProcess {
  child: ChildProcess;
  /** The exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** stdout and stderr so far, interleaved. */
  output(): string;
}

/**
 * Starts the server from the test run's bundle of it (scripts/process-bundles.ts), or with
 * `throughTsx` from its source through tsx, as `npm start` does.
 */
export function startMain(env: Record<string, string>, { throughTsx = false } = {}): MainProcess {
  const args = throughTsx ? ['--conditions=runplane-source', '--import', 'tsx', 'src/main.ts'] : nodeArgs('src/main.ts');
  const child = spawn(process.execPath, args, { env: { ...process.env, PORT: '0', ...env } });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, exited, output: () => output };
}
