/**
 * `npm run test:packages`: the packages as a project next door gets them. Packs every package
 * (`npm pack --workspaces --include-workspace-root`, or takes the tarballs in PACKS_DIR), then in
 * fresh projects outside the repository (no workspace links):
 * - the client alone: nothing of the server installed, its size on disk, its own minified code;
 *   imported from plain Node; a strict TypeScript project using it compiles (node16 and bundler);
 * - the server with both packages: `npx runplane` serves GraphQL and takes a createRun, and
 *   `npx runplane-engine` answers the AWS SDK.
 * Exits 1 naming each check that failed.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSC = fileURLToPath(import.meta.resolve('typescript/bin/tsc'));
/** Targets (README, "Packages"): the client with its dependencies installed, and its own minified code. */
const CLIENT_INSTALLED_BYTES = 5 * 2 ** 20;
const CLIENT_OWN_MINIFIED_BYTES = 30 * 1024;
const SERVER_PACKAGES = [
  '@aws-sdk/client-dynamodb',
  'dynalite',
  'ioredis',
  'graphql-yoga',
  'runplane',
  '@runplane/engine',
  'typescript',
  'gql.tada',
];

const failures: string[] = [];
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};
const run = (cwd: string, command: string, args: string[], env: Record<string, string> = {}) =>
  execFileSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
const npm = (cwd: string, ...args: string[]) => run(cwd, 'npm', [...args, '--no-audit', '--no-fund', '--loglevel=error']);

function project(name: string, extra: Record<string, unknown> = {}) {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true, type: 'module', ...extra }, null, 2));
  return dir;
}

/** The packages installed under `modules` (scoped ones by their full name), as npm laid them out. */
function installedPackages(modules: string): Set<string> {
  const names = new Set<string>();
  for (const name of readdirSync(modules)) {
    if (name.startsWith('.')) continue;
    if (name.startsWith('@')) for (const scoped of readdirSync(join(modules, name))) names.add(`${name}/${scoped}`);
    else names.add(name);
  }
  return names;
}

function sizeOf(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}

const work = mkdtempSync(join(tmpdir(), 'runplane-packages-'));
const children: ChildProcess[] = [];
try {
  const packs = process.env.PACKS_DIR ?? join(work, 'packs');
  if (!process.env.PACKS_DIR) {
    mkdirSync(packs);
    console.log('packing (npm pack --workspaces --include-workspace-root)...');
    npm(ROOT, 'pack', '--workspaces', '--include-workspace-root', '--pack-destination', packs);
  }
  const tarball = (prefix: string) => {
    const found = readdirSync(packs).find((file) => file.startsWith(prefix) && /^[a-z-]+-\d+\.\d+\.\d+\.tgz$/.test(file));
    if (!found) throw new Error(`no ${prefix}*.tgz in ${packs}`);
    return join(packs, found);
  };
  const [server, client, engine] = [tarball('runplane-0'), tarball('runplane-client-'), tarball('runplane-engine-')];

  // The client alone.
  const agent = project('agent');
  npm(agent, 'install', client);
  const names = installedPackages(join(agent, 'node_modules'));
  check(
    !SERVER_PACKAGES.some((name) => names.has(name)),
    `the client alone installs nothing of the server (${[...names].sort().join(', ')})`,
  );
  const bytes = sizeOf(join(agent, 'node_modules'));
  check(
    bytes < CLIENT_INSTALLED_BYTES,
    `the client installs ${(bytes / 2 ** 20).toFixed(2)} MB in ${names.size} packages (target under 5 MB)`,
  );
  const own = await build({
    entryPoints: [join(agent, 'node_modules/@runplane/client/dist/index.js')],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'neutral',
    external: ['@0no-co/graphql.web', 'eventsource-parser', 'graphql-ws', 'graphql-ws/*'],
    write: false,
    logLevel: 'silent',
  });
  const ownBytes = own.outputFiles[0]?.contents.byteLength ?? 0;
  // Reported, not failed: the target is README's to state, measured here.
  console.log(
    `info the client's own code, minified: ${(ownBytes / 1024).toFixed(1)} KB (target under ${CLIENT_OWN_MINIFIED_BYTES / 1024} KB)`,
  );

  writeFileSync(
    join(agent, 'plain.js'),
    `import { createRunplane, operations, RunplaneError } from '@runplane/client';
const client = createRunplane({ url: 'http://127.0.0.1:1/graphql', transport: 'sse' });
if (typeof client.appendEvent !== 'function' || !operations.CreateRun || !RunplaneError) throw new Error('missing exports');
await client.close();
console.log('imported');`,
  );
  check(run(agent, process.execPath, ['plain.js']).trim() === 'imported', 'plain Node 20 JavaScript imports the client and makes one');

  writeFileSync(
    join(agent, 'worker.ts'),
    `import { createRunplane, graphql, operations, type ResultOf, type Runplane, RunplaneError } from '@runplane/client';
export async function work(client: Runplane): Promise<number> {
  const appended = await client.appendEvent({ runId: 'r', type: 'step', payload: { n: 1 } });
  if (appended.__typename === 'SequenceConflict') return appended.lastSeq;
  const run: ResultOf<typeof operations.ReadRun> | undefined = undefined;
  void run;
  const page = await client.request(graphql<{ run: { status: string } | null }, { id: string }>('query($id: ID!) { run(id: $id) { status } }'), { id: 'r' });
  return page.run ? 1 : appended.__typename === 'Event' ? appended.seq : 0;
}
export const made = (url: string) => createRunplane({ url });
export const isRefusal = (err: unknown) => err instanceof RunplaneError && err.retryable;`,
  );
  for (const [module, resolution] of [
    ['node16', 'node16'],
    ['esnext', 'bundler'],
  ]) {
    writeFileSync(
      join(agent, `tsconfig.${resolution}.json`),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module,
          moduleResolution: resolution,
          target: 'ES2022',
          lib: ['ES2022', 'DOM'],
          types: [],
          skipLibCheck: false,
          exactOptionalPropertyTypes: true,
        },
        files: ['worker.ts'],
      }),
    );
    let output = '';
    try {
      run(agent, process.execPath, [TSC, '-p', `tsconfig.${resolution}.json`]);
    } catch (err) {
      output = `${(err as { stdout?: string }).stdout ?? ''}`.slice(0, 2000);
    }
    check(
      output === '',
      `a strict TypeScript project (moduleResolution ${resolution}, skipLibCheck off) compiles against the client${output ? `:\n${output}` : ''}`,
    );
  }
  const hasOperationsRead = readFileSync(join(agent, 'node_modules/@runplane/client/dist/operations.d.ts'), 'utf8').includes('ReadRun');
  if (!hasOperationsRead) failures.push('operations.ReadRun is gone: update worker.ts');

  // The server, with both packages, from the tarballs alone.
  const host = project('host');
  npm(host, 'install', server, client, engine);
  const hostPackages = installedPackages(join(host, 'node_modules'));
  console.log(
    `info the server with both packages installs ${(sizeOf(join(host, 'node_modules')) / 2 ** 20).toFixed(1)} MB in ${hostPackages.size} top-level packages`,
  );
  check(!hostPackages.has('tsx'), 'the server installs without tsx: it runs compiled JavaScript');
  const up = await started(host, ['runplane'], { PORT: '0', RUNPLANE_IN_MEMORY: 'true' }, /Runplane is up: (\S+)/);
  const created = await fetch(up, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      query: 'mutation { createRun(input: { id: "packed-1", task: "t", budgetCap: 10 }) { __typename ... on Run { id status } } }',
    }),
  }).then((r) => r.json() as Promise<{ data?: { createRun?: { __typename: string; status?: string } } }>);
  check(created.data?.createRun?.__typename === 'Run', `npx runplane serves GraphQL and takes a createRun (${JSON.stringify(created)})`);

  const endpoint = await started(host, ['runplane-engine', '--port', '0', '--in-memory'], {}, /on (http:\S+)/);
  writeFileSync(
    join(host, 'sdk.js'),
    `import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
const client = new DynamoDBClient({ endpoint: process.argv[2], region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
console.log(JSON.stringify((await client.send(new ListTablesCommand({}))).TableNames));`,
  );
  check(run(host, process.execPath, ['sdk.js', endpoint]).trim() === '[]', 'npx runplane-engine answers the AWS SDK');
} catch (err) {
  failures.push(`${(err as Error).message}\n${(err as { stderr?: string }).stderr ?? ''}`);
} finally {
  // npx runs the bin as its child: the whole group goes.
  for (const child of children) if (child.pid) process.kill(-child.pid, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
}

/** `npx <args>` in `cwd` until its output matches `ready`: the first group. */
function started(cwd: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<string> {
  const child = spawn('npx', ['--no-install', ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npx ${args.join(' ')} did not start in 60 s:\n${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk;
      const match = ready.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npx ${args.join(' ')} exited ${code}:\n${output}`));
    });
  });
}

if (failures.length) {
  console.error(`\n${failures.length} package check(s) failed:\n${failures.join('\n')}`);
  process.exit(1);
}
console.log('\nevery package check passed');
// esbuild's service would hold the process open.
process.exit(0);
