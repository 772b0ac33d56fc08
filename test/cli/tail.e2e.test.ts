/** `npm run tail` as an operator runs it: a child process printing a run's events, surviving a server restart. */

import { type ChildProcess, spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { expect, test } from 'vitest';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { uniqueName } from '../support/aws.ts';
import { ownEngine } from '../support/engine.ts';
import { freePort } from '../support/ports.ts';
import { putEventRow } from '../support/runs.ts';
import { startTestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

function tail(args: string[]) {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs('src/cli/tail.ts'), ...args]);
  const out = { lines: [] as string[], err: '', raw: '' };
  let buffer = '';
  child.stdout?.on('data', (chunk) => {
    out.raw += chunk;
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    out.lines.push(...lines);
  });
  child.stderr?.on('data', (chunk) => {
    out.err += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, out, exited };
}

const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename } }`;

test('npm run tail prints a run from the start, then live, and resumes exactly after a server restart', async () => {
  const first = await startTestServer({ stopAfterAll: false });
  const runId = uniqueName('run');
  await first.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
    input: { id: runId, task: 't', budgetCap: 1 },
  });
  await first.gql(APPEND, { input: { runId, type: 'run.created' } });
  await first.gql(APPEND, { input: { runId, type: 'tool.returned', payload: { ok: true } } });

  const { child, out, exited } = tail([runId, '--from-start', '--url', first.url]);
  try {
    await waitFor(() => out.lines.length >= 2, { timeoutMs: 20_000, what: 'the history' });
    await first.gql(APPEND, { input: { runId, type: 'live' } });
    await waitFor(() => out.lines.length >= 3, { what: 'a live event' });

    // The server goes away and comes back on the same port: tail resumes after seq 3.
    const port = new URL(first.url).port;
    await first.server.stop();
    const second = await startTestServer({ table: first.table, env: { PORT: port }, stopAfterAll: false });
    try {
      await second.gql(APPEND, { input: { runId, type: 'after.restart' } });
      await second.gql(APPEND, { input: { runId, type: 'after.restart' } });
      await waitFor(() => out.lines.length >= 5, { timeoutMs: 20_000, what: 'events after the restart' });
      await second.server.live.poller.caughtUp();
    } finally {
      await second.server.stop();
    }
    expect(out.lines.map((line) => line.replace(/ {2}\S+Z {2}/, ' '))).toEqual([
      '#1 run.created',
      '#2 tool.returned  {"ok":true}',
      '#3 live',
      '#4 after.restart',
      '#5 after.restart',
    ]);
    expect(out.err).toMatch(/the server is restarting; retrying in .*, resuming after seq 3/);
    expect(out.err).not.toMatch(/object Object|\n\s+at /);
  } finally {
    child.kill('SIGINT');
    await exited;
  }
});

test('an unknown run ends npm run tail with a message and exit code 1', async () => {
  const api = await startTestServer();
  const { out, exited } = tail([uniqueName('absent'), '--url', api.url]);
  expect(await exited).toBe(1);
  expect(out.err).toMatch(/does not exist/);
});

test('npm run tail rides out a moment when the table cannot be read', async () => {
  const { engine } = await ownEngine();
  const api = await startTestServer({ endpoint: engine.endpoint, stopAfterAll: false });
  const runId = uniqueName('run');
  try {
    await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
      input: { id: runId, task: 't', budgetCap: 1 },
    });
    // Written past the API: the server reads the run when the subscription starts.
    await putEventRow(api, runId, 1, { type: 'before', payload: null });
    // The subscription's first reads fail: tail must resume, not give up.
    using _ = engine.faults.inject({ operations: ['GetItem'], error: 'InternalServerError', times: 4 });
    const { child, out, exited } = tail([runId, '--from-start', '--url', api.url]);
    try {
      await waitFor(() => out.lines.length >= 1, { timeoutMs: 20_000, what: 'the event after the outage' });
      expect(out.lines[0]).toMatch(/^#1 .* before$/);
      expect(out.err).toMatch(/DynamoDB could not be reached or failed.*; retrying in .*, resuming after seq 0/);
    } finally {
      child.kill('SIGINT');
      await exited;
    }
  } finally {
    await api.server.stop();
    await engine.close();
  }
});

test('npm run tail waits for a server that is not up yet, saying so plainly', async () => {
  const free = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  const url = `http://127.0.0.1:${free}/graphql`;
  const { child, out, exited } = tail([uniqueName('later'), '--from-start', '--url', url]);
  try {
    await waitFor(() => out.err.includes(`server not reachable at ${url} (ECONNREFUSED); retrying in`), { what: 'the plain message' });
    const api = await startTestServer({ env: { PORT: String(free) } });
    const runId = /tail: run (\S+) on/.exec(out.err)?.[1] as string;
    await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
      input: { id: runId, task: 't', budgetCap: 1 },
    });
    await api.gql(APPEND, { input: { runId, type: 'finally' } });
    await waitFor(() => out.lines.length >= 1, { timeoutMs: 30_000, what: 'the event once the server is up' });
    expect(out.lines[0]).toMatch(/^#1 .* finally$/);
    expect(out.err).not.toMatch(/object Object|\n\s+at /);
  } finally {
    child.kill('SIGINT');
    await exited;
  }
});

test('on a finished run, npm run tail prints it to its end and exits 0; live from now, it exits at once', async () => {
  const api = await startTestServer();
  const runId = uniqueName('done');
  await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
    input: { id: runId, task: 't', budgetCap: 1 },
  });
  for (const type of ['one', 'two']) await api.gql(APPEND, { input: { runId, type } });
  await api.gql('mutation($input: TransitionRunInput!) { transitionRun(input: $input) { __typename } }', {
    input: { runId, from: 'RUNNING', to: 'COMPLETED' },
  });
  const whole = tail([runId, '--from-start', '--url', api.url]);
  expect(await whole.exited).toBe(0);
  expect(whole.out.lines.map((line) => line.split('  ')[2])).toEqual(['one', 'two']);
  expect(whole.out.err).toMatch(/run \S+ is COMPLETED; its last event is #2/);
  const live = tail([runId, '--url', api.url]);
  expect(await live.exited).toBe(0);
  expect(live.out.lines).toEqual([]);
});

test('with no server answering, npm run tail gives up after --wait, saying where it looked and what to do', async () => {
  const url = `http://127.0.0.1:${await freePort()}/graphql`;
  const { out, exited } = tail([uniqueName('nowhere'), '--url', url, '--wait', '1']);
  expect(await exited).toBe(1);
  expect(out.err).toMatch(
    new RegExp(
      `no Runplane server answered at ${url.replaceAll('.', '\\.')} within 1 s .*start one \\(npm start\\), or point --url or RUNPLANE_URL at it`,
    ),
  );
});

test('npm run tail --output follows a run output stream as text, and ends when the stream is final', async () => {
  const api = await startTestServer();
  const runId = uniqueName('out');
  await api.gql(`mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }`, {
    input: { id: runId, task: 't', budgetCap: 1 },
  });
  const OUTPUT = 'mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename } }';
  await api.gql(OUTPUT, { input: { runId, stream: 'llm', offset: 0, text: 'Hello, ' } });
  const { out, exited } = tail([runId, '--output', 'llm', '--url', api.url]);
  await waitFor(() => out.raw.includes('Hello, '), { what: 'the stored text' });
  await api.gql(OUTPUT, { input: { runId, stream: 'llm', offset: 7, text: 'world', final: true } });
  expect(await exited).toBe(0);
  expect(out.raw).toBe('Hello, world');
});
