/** `npm start` as a newcomer runs it: a child process, real ports, data on disk across restarts. */
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { startMain } from '../support/main-process.ts';
import { waitFor } from '../support/wait.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'runplane-start-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const start = (env: Record<string, string>) => startMain({ RUNPLANE_DATA_DIR: dataDir, ...env }, { throughTsx: true });

async function graphql(url: string, query: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  // biome-ignore lint/suspicious/noExplicitAny: the test reads the response by path
  return (await response.json()) as { data: Record<string, any> };
}

test('npm start serves GraphiQL and /graphql on the embedded engine, keeps data across a restart, and stops on Ctrl-C', async () => {
  const first = start({});
  try {
    await waitFor(() => /Runplane is up: (http:\S+)/.test(first.output()), { timeoutMs: 30_000, what: 'the server to say where it is' });
    const url = /Runplane is up: (http:\S+)/.exec(first.output())?.[1] as string;
    // No port unless asked for: nothing but the API listens.
    expect(first.output()).toContain('embedded engine in this process, no port (RUNPLANE_ENGINE_PORT gives it one)');
    expect(first.output()).not.toContain('any local process');
    expect(first.output()).toContain(`data in ${dataDir}`);
    expect(first.output()).toContain('(created now)');

    const page = await fetch(url, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<title>Runplane · GraphiQL</title>');
    expect(html).toContain('Runplane, in GraphiQL.');
    expect(html).not.toContain('Runplane is an in-browser tool');

    const created = await graphql(
      url,
      'mutation { createRun(input: { id: "kept", task: "survive a restart", budgetCap: 5 }) { __typename } }',
    );
    expect(created.data.createRun.__typename).toBe('Run');
    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
  } finally {
    first.child.kill('SIGKILL');
  }

  // A client's variable set on the server by mistake: said at start, by name, its value never printed.
  const second = start({ RUNPLANE_ENGINE_PORT: '0', RUNPLANE_API_KEY: 'meant-for-a-client-0123' });
  try {
    await waitFor(() => /Runplane is up: (http:\S+)/.test(second.output()), { timeoutMs: 30_000, what: 'the restarted server' });
    const url = /Runplane is up: (http:\S+)/.exec(second.output())?.[1] as string;
    expect(second.output()).toMatch(/runplane: warning: RUNPLANE_API_KEY is set but the server does not read it/);
    expect(second.output()).not.toContain('meant-for-a-client-0123');
    // Asked for, the engine's port is printed, with a word on who may use it.
    const engine = /embedded engine on (http:\/\/127\.0\.0\.1:\d+)/.exec(second.output())?.[1];
    expect(engine).toBeDefined();
    expect(second.output()).toContain(`the embedded engine's port ${engine} takes requests from any local process`);
    expect(second.output()).not.toContain('(created now)');
    const read = await graphql(url, '{ run(id: "kept") { task budget { cap } } }');
    expect(read.data.run).toEqual({ task: 'survive a restart', budget: { cap: 5 } });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  } finally {
    second.child.kill('SIGKILL');
  }
});

test('a server whose output nobody reads any more stops cleanly, not with EPIPE', async () => {
  const orphan = startMain({ RUNPLANE_IN_MEMORY: 'true', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' });
  try {
    await waitFor(() => /Runplane is up: (http:\S+)/.test(orphan.output()), { timeoutMs: 30_000, what: 'the server to start' });
    // The reader goes away, as a parent that exited would: the next log line meets a closed pipe.
    orphan.child.stdout?.destroy();
    orphan.child.stderr?.destroy();
    orphan.child.kill('SIGTERM');
    expect(await orphan.exited).toBe(0);
  } finally {
    orphan.child.kill('SIGKILL');
  }
});

test('a bad setting is refused at start with a message naming it', async () => {
  const bad = start({ PORT: 'eighty' });
  expect(await bad.exited).toBe(1);
  expect(bad.output()).toContain('PORT="eighty": must be a whole number from 0 to 65535');
});

test('a port in use is one plain line, no stack trace, and exit code 1', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = taken.address() as AddressInfo;
    const blocked = startMain({ RUNPLANE_IN_MEMORY: 'true', PORT: String(port), AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' });
    expect(await blocked.exited).toBe(1);
    expect(blocked.output().trim()).toBe(
      `runplane: 127.0.0.1:${port} is already in use by another process: stop it, or start on another PORT`,
    );
  } finally {
    taken.close();
  }
});
