/**
 * One engine for each tier (vitest project) of the test run, shared by its test files over real HTTP.
 * With RUNPLANE_TEST_DYNAMODB_ENDPOINT set, the suites run against that endpoint instead
 * (tests that need the embedded engine's controls are skipped there).
 */
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startEngine } from '@runplane/engine';
import type { TestProject } from 'vitest/node';
import { buildProcessBundles, removeBundlesOfEndedRuns } from '../../scripts/process-bundles.ts';
import { assertTestEndpoint } from './endpoint.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
    /** True when the endpoint is the embedded engine (its fault and control hooks exist). */
    embeddedEngine: boolean;
  }
}

/** Where this test run keeps its bundles of the processes the tests start (inside the repository: packages resolve from it). */
const ALL_BUNDLES = fileURLToPath(new URL('../../node_modules/.cache/runplane-process-bundles/', import.meta.url));
const BUNDLES = `${ALL_BUNDLES}${process.pid}/`;

/** Built once for every tier of the run (each tier's setup runs in this one process), removed after the last. */
let bundles: Promise<void> | undefined;
let tiersUsingBundles = 0;

async function useBundles() {
  tiersUsingBundles++;
  const release = () => {
    if (--tiersUsingBundles === 0) rmSync(BUNDLES, { recursive: true, force: true });
  };
  bundles ??= (async () => {
    // What killed runs left behind (a run removes its own after its last tier).
    removeBundlesOfEndedRuns(ALL_BUNDLES);
    await buildProcessBundles(BUNDLES);
  })();
  try {
    await bundles;
  } catch (err) {
    release();
    throw err;
  }
  return release;
}

export default async function setup(project: TestProject) {
  const external = process.env.RUNPLANE_TEST_DYNAMODB_ENDPOINT;
  if (external) assertTestEndpoint(external);
  const releaseBundles = await useBundles();
  if (external) {
    project.provide('dynamodbEndpoint', external);
    project.provide('embeddedEngine', false);
    return releaseBundles;
  }
  // Lock waits without a bound: on a loaded machine a 2 s wait behind other tests' writes must
  // not turn into a TransactionConflict the test did not ask for (packages/engine/test/locks.test.ts
  // checks the bound on engines of its own).
  const engine = await startEngine({ lockWaitMs: Number.POSITIVE_INFINITY }).catch((err) => {
    releaseBundles();
    throw err;
  });
  project.provide('dynamodbEndpoint', engine.endpoint);
  project.provide('embeddedEngine', true);
  return async () => {
    await engine.close();
    releaseBundles();
  };
}
