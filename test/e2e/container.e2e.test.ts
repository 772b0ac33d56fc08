/**
 * The container commands, run as Docker would run them (no Docker engine here): the process
 * the Dockerfile's CMD starts is the server itself, so SIGTERM to it (what `docker stop`
 * sends) runs the graceful stop; the compose services run node directly too, and the api's
 * healthcheck asks /ready. The image runs `npm run build`'s dist/cli/runplane.js; here the
 * same command runs from its source (src/cli/runplane.ts, which tsconfig.build.json compiles
 * to it); `npm run test:packages` runs the compiled one from the packed server.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { readMetrics } from '../support/metrics.ts';
import { rawSocket } from '../support/raw-ws.ts';
import { waitFor } from '../support/wait.ts';

const dockerfile = readFileSync('Dockerfile', 'utf8');
const compose = readFileSync('docker-compose.yml', 'utf8');

/** The exec-form CMD of the Dockerfile. */
const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)?.[1] ?? 'null') as string[];

/** A compose service's `command:` or healthcheck `test:` (written as JSON arrays in the file). */
function composeArray(service: string, key: 'command' | 'test') {
  const block = new RegExp(`^  ${service}:\\n((?:    .*\\n|\\n)+)`, 'm').exec(compose)?.[1] ?? '';
  return JSON.parse(new RegExp(`^\\s+${key}: (\\[.*\\])$`, 'm').exec(block)?.[1] ?? 'null') as string[];
}

const dir = mkdtempSync(join(tmpdir(), 'runplane-container-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The image's compiled bin, and the source it is compiled from. */
const BIN = 'dist/cli/runplane.js';
const BIN_SOURCE = 'src/cli/runplane.ts';

function run(argv: string[], env: Record<string, string>) {
  const [command, script, ...rest] = argv as [string, string, ...string[]];
  const args = script === BIN ? [...nodeArgs(BIN_SOURCE), ...rest] : [script, ...rest];
  const child: ChildProcess = spawn(command === 'node' ? process.execPath : command, args, {
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
  });
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

describe('the Dockerfile and compose commands', () => {
  test('start node itself, never npm (which would not pass SIGTERM on)', () => {
    for (const argv of [cmd, composeArray('api', 'command'), composeArray('engine', 'command')]) {
      expect(argv?.[0], JSON.stringify(argv)).toBe('node');
    }
    expect(composeArray('api', 'command')).toEqual(cmd);
    // The bin npm links from the packed server, the one the image runs.
    expect(cmd.slice(1)).toEqual([BIN, 'start']);
    expect(composeArray('engine', 'command').slice(1, 3)).toEqual([BIN, 'engine']);
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { bin: Record<string, string> };
    expect(manifest.bin.runplane).toBe(BIN);
    const build = JSON.parse(readFileSync('tsconfig.build.json', 'utf8')) as { compilerOptions: { rootDir: string; outDir: string } };
    expect(BIN_SOURCE.replace(`${build.compilerOptions.rootDir}/`, `${build.compilerOptions.outDir}/`).replace(/\.ts$/, '.js')).toBe(BIN);
    expect(compose).toMatch(/"127\.0\.0\.1:4000:4000"/);
    expect(compose).toMatch(/"127\.0\.0\.1:8000:8000"/);
  });

  test('the image is built once and runs compiled JavaScript as a non-root user, with no compiler', () => {
    const stages = dockerfile.split(/^FROM /m).slice(1);
    expect(stages.map((stage) => stage.split('\n')[0])).toEqual(['node:20-slim AS build', 'node:20-slim']);
    const [build, image] = stages as [string, string];
    expect(build).toMatch(/^RUN npm run build$/m);
    expect(image).toMatch(/^RUN npm ci --omit=dev/m);
    expect(image).toMatch(/^USER node$/m);
    expect(image).not.toMatch(/tsx|COPY \. \./);
    const ignored = readFileSync('.dockerignore', 'utf8').split('\n');
    for (const left of ['test', 'bench', 'chaos', 'docs', 'node_modules']) expect(ignored).toContain(left);
  });

  test("SIGTERM to the CMD's process stops the server gracefully: subscribers told to come back, exit 0; the healthcheck asks /ready", async () => {
    const allowedHosts = /^\s+RUNPLANE_ALLOWED_HOSTS: (\S+)$/m.exec(compose)?.[1] as string;
    const server = run(cmd, { PORT: '0', HOST: '127.0.0.1', RUNPLANE_IN_MEMORY: 'true', RUNPLANE_ALLOWED_HOSTS: allowedHosts });
    try {
      await waitFor(() => /Runplane is up: (\S+)/.test(server.output()), { timeoutMs: 60_000, what: 'the server' });
      const url = /Runplane is up: (\S+)/.exec(server.output())?.[1] as string;
      const healthcheck = composeArray('api', 'test')
        .slice(1)
        .map((arg) => arg.replace('http://127.0.0.1:4000', new URL(url).origin));
      expect(spawnSync(process.execPath, healthcheck.slice(1)).status).toBe(0);
      // Another container calls the api by its service name (compose's RUNPLANE_ALLOWED_HOSTS);
      // a name the file does not give is refused.
      const calledAs = (host: string) =>
        new Promise<number>((resolve, reject) => {
          const body = JSON.stringify({ query: '{ viewer { tenant } }' });
          request(
            {
              host: '127.0.0.1',
              port: new URL(url).port,
              path: '/graphql',
              method: 'POST',
              headers: { host: `${host}:4000`, 'content-type': 'application/json' },
            },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            },
          )
            .on('error', reject)
            .end(body);
        });
      expect(allowedHosts).toBe('api');
      expect(await calledAs('api')).toBe(200);
      expect(await calledAs('elsewhere.example')).toBe(403);

      const socket = await rawSocket(url);
      socket.subscribe('s', 'subscription { leaseChanged(unitId: "u") { owner } }');
      await waitFor(async () => (await readMetrics(url)).get('runplane_subscriptions_open') === 1, { what: 'the subscription to be open' });
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(server.output()).toMatch(/SIGTERM, stopping/);
      expect((await socket.closed).code).toBe(1012);
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  test('the engine service serves the name the api reaches it by, and no other; SIGTERM closes it and exits 0', async () => {
    const argv = composeArray('engine', 'command').map((arg) => (arg === '8000' ? '0' : arg === '/data' ? join(dir, 'data') : arg));
    const engine = run(argv, {});
    try {
      await waitFor(() => /engine: DynamoDB and DynamoDB Streams on/.test(engine.output()), { timeoutMs: 60_000, what: 'the engine' });
      const port = /Streams on http:\/\/[^:]+:(\d+)/.exec(engine.output())?.[1] as string;
      const apiReachesItAs = new URL(/AWS_ENDPOINT_URL_DYNAMODB: (\S+)/.exec(compose)?.[1] as string).hostname;
      const asNamed = (host: string) =>
        new Promise<number>((resolve, reject) =>
          request({ host: '127.0.0.1', port, headers: { host: `${host}:${port}` } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
            .on('error', reject)
            .end(),
        );
      expect(await asNamed(apiReachesItAs)).toBe(200);
      expect(await asNamed('rebind.attacker.example')).toBe(400);
      engine.child.kill('SIGTERM');
      expect(await engine.exited).toBe(0);
      expect(engine.output()).toMatch(/SIGTERM, closing/);
    } finally {
      engine.child.kill('SIGKILL');
    }
  });
});
