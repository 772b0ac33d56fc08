/**
 * The repository's Node entry points, prebuilt for the child processes a test run starts.
 * A process started with `--import tsx` compiles and resolves each of ~170 modules in tsx's
 * hooks before it serves; one loading Node's ESM graph of the packages resolves and links
 * several hundred more. A server from one CommonJS file holding its sources and its packages
 * starts on about half the CPU of one with its packages loaded by Node (2.8 s -> 1.3 s on a
 * slow machine), and the suite starts over a hundred servers, engines and workers on 2 cores.
 *
 * Left to Node: dynalite (the engine loads its actions by name, dynamically), classic-level
 * (a native addon) and the GraphiQL page (9 MB, loaded on its first request).
 *
 * The test run's global setup builds the bundles once and names their folder in
 * RUNPLANE_PROCESS_BUNDLES; without it (`npm run chaos`, `npm run bench`) processes start with tsx.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ENV = 'RUNPLANE_PROCESS_BUNDLES';

/** The scripts the tests start as processes of their own (paths from the repository's root). */
export const ENTRY_POINTS = [
  'src/main.ts',
  'src/cli/runplane.ts',
  'packages/engine/src/cli.ts',
  'src/cli/tail.ts',
  'src/cli/demo.ts',
  'test/support/claim-worker.ts',
];

const bundleName = (script: string) => `${script.replaceAll('/', '__').replace(/\.ts$/, '')}.cjs`;

/** Packages loaded by Node as they are, not bundled (see above). */
export const UNBUNDLED_PACKAGES = ['dynalite', 'classic-level', '@graphql-yoga/render-graphiql'];

const unbundled = (path: string) => UNBUNDLED_PACKAGES.some((name) => path === name || path.startsWith(`${name}/`));

/**
 * Each module keeps its own `import.meta.url` (assets and `createRequire` are found relative to
 * it, as when it runs unbundled); the packages Node loads itself stay imports.
 */
const asUnbundled: Plugin = {
  name: 'as-unbundled',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => (unbundled(args.path) ? { path: args.path, external: true } : undefined));
    build.onLoad({ filter: /\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)),
      loader: 'ts',
    }));
  },
};

/** Builds every entry point into `dir` (which must lie inside the repository, for packages to resolve). */
export async function buildProcessBundles(dir: string) {
  mkdirSync(dir, { recursive: true });
  await Promise.all(
    ENTRY_POINTS.map(async (script) => {
      const { warnings } = await build({
        entryPoints: [join(ROOT, script)],
        outfile: join(dir, bundleName(script)),
        bundle: true,
        platform: 'node',
        format: 'cjs',
        target: 'node20',
        sourcemap: true,
        plugins: [asUnbundled],
        // The workspace packages from their sources, as the tests import them.
        conditions: ['runplane-source'],
        // Before any module's own code: a script that checks whether it is the one run finds itself.
        // (After the directive: the sources are modules, strict throughout, and stay so.)
        banner: { js: `'use strict';\nprocess.argv[1] = ${JSON.stringify(join(ROOT, script))};` },
        logLevel: 'silent',
        absWorkingDir: ROOT,
      });
      // A package using what CommonJS lacks (import.meta, say) fails the build here, not the process later.
      if (warnings.length > 0)
        throw new Error(`bundling ${script}: ${warnings.map((w) => `${w.location?.file ?? ''}: ${w.text}`).join('; ')}`);
    }),
  );
  process.env[ENV] = dir;
}

/** Whether a process of that id is running (one of another user's counts: it cannot be signalled, but exists). */
function running(pid: number) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the bundles, under `parent`, of test runs that ended without removing their own (a
 * run killed, or one whose setup failed): each run's folder is named by its process id.
 * Returns the folders it removed.
 */
export function removeBundlesOfEndedRuns(parent: string): string[] {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return [];
  }
  const ended = names.filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid && !running(Number(name)));
  for (const name of ended) rmSync(join(parent, name), { recursive: true, force: true });
  return ended;
}

/**
 * The arguments for `node` that run `script` (a path from the repository's root): its bundle
 * when the test run built one, else the source through tsx. `process.argv[1]` names the script either way.
 */
export function nodeArgs(script: string): string[] {
  const dir = process.env[ENV];
  if (!dir || !ENTRY_POINTS.includes(script)) return ['--conditions=runplane-source', '--import', 'tsx', script];
  return ['--enable-source-maps', relative(process.cwd(), join(dir, bundleName(script)))];
}
