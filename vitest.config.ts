import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql 16 ships CommonJS and ESM copies; Node (and so every library) loads the CommonJS one.
    // Tests must load that same copy, or types built by one are foreign to the other.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Most files wait on servers and sockets, not on the CPU: more of them at once than cores.
    maxWorkers: 3,
    // Generous: a test waits on conditions, and a slow or loaded machine must not fail it.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // The SDK warns once per process that its future releases need Node 22; that is known.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
