import { createRequire } from 'node:module';
import { defaultClientConditions, defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const require = createRequire(import.meta.url);

/**
 * A test file's tier is in its name:
 * - `*.unit.test.ts`: pure, in this process, no engine (`npm run test:quick`, project `unit`);
 * - `*.test.ts`: in this process, on the test run's engine, real servers on loopback;
 * - `*.slow.test.ts`: the same, among the longest (load, fuzzing, real time running out);
 * - `*.e2e.test.ts`: child processes (`npm start`, the CLIs), replicas and Redis;
 * - test/browser/: Chromium driven by playwright-core; test/chaos/: the fault harness, short.
 */
const tests = ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'];
const units = ['test/**/*.unit.test.ts', 'packages/*/test/**/*.unit.test.ts'];

/** The longest files start first, so that the short ones fill the workers around them at the end. */
const startOrder = [/\/test\/chaos\//, /\/test\/browser\//, /\.e2e\.test\.ts$/, /\.slow\.test\.ts$/, /(?<!\.unit)\.test\.ts$/];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]) {
    const rank = (file: TestSpecification) => {
      const at = startOrder.findIndex((pattern) => pattern.test(file.moduleId));
      return at === -1 ? startOrder.length : at;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

/** The workspace packages from their sources (their `runplane-source` export), as Node runs them in development. */
const source = 'runplane-source';
/** In Node: Node's own conditions (not 'module': packages would load their ESM builds Node does not run). */
const serverResolve = { conditions: [source, ...defaultServerConditions.filter((c) => c !== 'module')], externalConditions: [source] };

export default defineConfig({
  resolve: {
    // graphql 16 ships CommonJS and ESM copies; Node (and so every library) loads the CommonJS one.
    // Tests must load that same copy, or types built by one are foreign to the other.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
    conditions: [source, ...defaultClientConditions],
  },
  ssr: { resolve: serverResolve },
  // Where vitest itself loads the global setup.
  environments: { __vitest__: { resolve: serverResolve } },
  test: {
    projects: [
      { extends: true, test: { name: 'unit', include: units } },
      {
        extends: true,
        test: {
          name: 'all',
          include: tests,
          exclude: units,
          // One engine for the run's files, shared by them over real HTTP.
          globalSetup: ['test/support/global-setup.ts'],
          // Files share a worker's modules (the server's import is most of a small file's cost); each
          // starts servers and processes of its own and stops them after itself.
          isolate: false,
        },
      },
    ],
    sequence: { sequencer: LongestFirst },
    // Most files wait on servers and sockets, not on the CPU: more of them at once than cores.
    maxWorkers: 3,
    // Generous: a test waits on conditions, and a slow or loaded machine must not fail it.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // The SDK warns once per process that its future releases need Node 22; that is known.
    // Engines check signatures against AWS credentials in their environment, and the tests sign
    // with fake ones: the processes tests start get none of this shell's (empty is unset).
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' },
  },
});
