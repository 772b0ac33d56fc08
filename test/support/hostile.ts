/**
 * A server under a hostile tenant's load: `npm start` in a child process (its memory its own,
 * its heap capped) on an engine in a process of its own (`npm run engine`, so that neither
 * the server nor the test's clients share a thread with it), which counts every read the
 * server sends it (GetItem, Query, BatchGetItem, ...: the requests a read budget bounds,
 * whoever made them). Another tenant's latency is sampled against its own unloaded baseline.
 */
import { spawn } from 'node:child_process';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import type { FaultRule } from '../../src/engine/faults.ts';
import type { ControlAnswer } from '../../src/engine/remote-control.ts';
import { uniqueName } from './aws.ts';
import { type MainProcess, startMain } from './main-process.ts';
import { metric } from './metrics.ts';
import { waitFor } from './wait.ts';

/** The operations that read the table. */
const READS = ['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems'];

export interface HostileServer {
  url: string;
  main: MainProcess;
  /** Table reads the engine answered so far. */
  reads(): Promise<number>;
  // biome-ignore lint/suspicious/noExplicitAny: tests read deep into responses by path
  gql(query: string, variables: Record<string, unknown>, key: string): Promise<{ data?: any; errors?: GraphQLErrorShape[] }>;
  /** The server's resident set now (`runplane_process_resident_memory_bytes`). */
  rss(): Promise<number>;
  /** Whether the process is still up. */
  alive(): boolean;
  stop(): Promise<void>;
}

export interface GraphQLErrorShape {
  message: string;
  extensions?: { code?: string; [key: string]: unknown };
}

export async function startHostileServer({ env, heapMb }: { env: Record<string, string>; heapMb: number }): Promise<HostileServer> {
  const engine = await engineProcess();
  const main = startMain({
    AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    RUNPLANE_TABLE: uniqueName('hostile'),
    RUNPLANE_GRAPHIQL: 'false',
    // Idle connections kept longer than the test's pauses (a request on one being closed is reset).
    RUNPLANE_KEEP_ALIVE_SECONDS: '60',
    NODE_OPTIONS: `--max-old-space-size=${heapMb}`,
    ...env,
  });
  const alive = () => main.child.exitCode === null && main.child.signalCode === null;
  await waitFor(() => /Runplane is up: (\S+)/.test(main.output()) || !alive(), { timeoutMs: 60_000, what: 'the server to start' });
  const url = /Runplane is up: (\S+)/.exec(main.output())?.[1];
  if (!url) throw new Error(`the server did not start:\n${main.output()}`);
  return {
    url,
    main,
    reads: engine.reads,
    async gql(query, variables, key) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ query, variables }),
      });
      const text = await response.text();
      try {
        return JSON.parse(text);
      } catch {
        throw new Error(`HTTP ${response.status}, not JSON: ${text.slice(0, 300)}`);
      }
    },
    rss: () => metric(url, 'runplane_process_resident_memory_bytes'),
    alive,
    async stop() {
      if (alive()) main.child.kill('SIGTERM');
      await main.exited;
      await engine.stop();
    },
  };
}

/** The 99th percentile of `samples` (ms): with fewer than 100 of them, the largest but one, or the largest. */
export function p99(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

/** How long `request` takes, `times` times one after the other (ms each). */
export async function timed(request: () => Promise<unknown>, times: number) {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) samples.push(await took(request));
  return samples;
}

/** `request` one after the other until `until` settles (and at least `least` times): how long each took (ms). */
export async function timedWhile(request: () => Promise<unknown>, until: Promise<unknown>, least = 5) {
  let done = false;
  void until.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  const samples: number[] = [];
  while (!done || samples.length < least) samples.push(await took(request));
  return samples;
}

/** `npm run engine` in memory, told over IPC (engine/remote-control.ts) to count the reads it answers. */
async function engineProcess() {
  const child = spawn(process.execPath, [...nodeArgs('src/engine/cli.ts'), '--port', '0', '--in-memory'], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const answers = new Map<number, (answer: ControlAnswer) => void>();
  child.on('message', (answer: ControlAnswer) => answers.get(answer.id)?.(answer));
  let lastId = 0;
  const control = (message: { op: 'inject'; rule: FaultRule } | { op: 'remove'; fault: number }) =>
    new Promise<ControlAnswer>((resolve, reject) => {
      const id = ++lastId;
      answers.set(id, (answer) => {
        answers.delete(id);
        if (answer.ok) resolve(answer);
        else reject(new Error(`engine control ${message.op}: ${answer.error}`));
      });
      child.send({ id, ...message });
    });
  await waitFor(() => /http:\/\/127\.0\.0\.1:\d+/.test(output) || child.exitCode !== null, {
    timeoutMs: 30_000,
    what: 'the engine to start',
  });
  const endpoint = /http:\/\/127\.0\.0\.1:\d+/.exec(output)?.[0];
  if (!endpoint) throw new Error(`the engine did not start:\n${output}`);
  // A rule without an error or latency only counts what it matches. To read its count it is
  // removed, a new one taking over in the same turn (the engine handles both messages back to back).
  const counter = async () => (await control({ op: 'inject', rule: { operations: READS } })).fault as number;
  let current = await counter();
  let counted = 0;
  return {
    endpoint,
    async reads() {
      const [next, removed] = await Promise.all([counter(), control({ op: 'remove', fault: current })]);
      current = next;
      counted += removed.hits ?? 0;
      return counted;
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** How long `request` took (ms); Infinity when it failed (the server gone, say). */
async function took(request: () => Promise<unknown>) {
  const started = performance.now();
  try {
    await request();
  } catch {
    return Number.POSITIVE_INFINITY;
  }
  return performance.now() - started;
}

/** The largest value `read` gave, read every `everyMs` until `until` settles. */
export async function peakWhile(read: () => Promise<number>, until: Promise<unknown>, everyMs = 100) {
  let done = false;
  void until.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  let peak = await read();
  while (!done) {
    await new Promise((resolve) => setTimeout(resolve, everyMs));
    peak = Math.max(peak, await read().catch(() => peak));
  }
  return peak;
}

/** What a response says: answered whole, or the codes of its errors. */
export const outcomeOf = (response: { data?: unknown; errors?: GraphQLErrorShape[] }) =>
  response.errors?.length ? [...new Set(response.errors.map((e) => e.extensions?.code ?? 'no code'))].sort().join(',') : 'answered';
