import { createRequire } from 'node:module';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { isWholeRun, projectsOf, runOrder, type Tier, tierOf } from './test/tiers.ts';

const require = createRequire(import.meta.url);
const root = import.meta.dirname;

/** One project per tier, or one for all of them in `npm test` (test/tiers.ts says why), all on the settings below. */
const projects = projectsOf(root, isWholeRun(process.env, process.argv)).map(({ name, include }) => ({
  extends: true as const,
  test: {
    name,
    include,
    // One engine per project for its files, shared by them over real HTTP.
    globalSetup: ['test/support/global-setup.ts'],
    // Files share a worker's modules (the server's import is most of a small file's cost); each
    // starts servers and processes of its own and stops them after itself.
    isolate: false,
  },
}));

/** Files in test/tiers.ts's run order (vitest's own orders projects by name), each tier's in vitest's order. */
class TiersInRunOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]) {
    const rank = (file: TestSpecification) => runOrder.indexOf(tierOf(relative(root, file.moduleId)) as Tier);
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  resolve: {
    // graphql 16 ships CommonJS and ESM copies; Node (and so every library) loads the CommonJS one.
    // Tests must load that same copy, or types built by one are foreign to the other.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    // `npm test` runs every tier; `npm run test:quick` the ones without processes, browsers or Redis.
    projects,
    sequence: { sequencer: TiersInRunOrder },
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
