/**
 * runplane/client: a typed client for Runplane's API, for Node 20+ and browsers. It depends on
 * nothing of the server: what it knows of the API comes from schema.graphql.
 *
 *   import { createRunplane } from 'runplane/client';
 *   const runplane = createRunplane({ url: 'http://127.0.0.1:4000/graphql', apiKey });
 */
export {
  createRunplane,
  DEFAULT_MAX_BUFFERED_EVENTS,
  type LeaseList,
  type PageOptions,
  type RunList,
  type Runplane,
  type RunplaneOptions,
  type RunRead,
} from './client.ts';
export { clientCodes, type ErrorCode, isRetryableCode, RunplaneError, serverCodes, serverRetryableCodes } from './errors.ts';
export { type Document, graphql, type Json, type ResultOf, type ValidDocument, type VariablesOf } from './graphql.ts';
export type { LeaseContext, LeaseOptions } from './lease.ts';
export type * from './mutations.ts';
export { newIdempotencyKey } from './mutations.ts';
export type { Notice, SeqRange } from './notices.ts';
export * as operations from './operations.ts';
export type { OutputWriter, OutputWriterOptions, RunOutputOptions } from './output.ts';
export { defaultReconnect, defaultRetry, type RetryPolicy } from './retry.ts';
export type { ClaimedRun, RunClaimOptions, RunClaimState } from './run-claim.ts';
export type { RunEvent, RunEventsOptions } from './run-events.ts';
export { MAX_MISSING_RANGES } from './sequencer.ts';
export type { LeaseState, RunState, StateStreamOptions } from './state-streams.ts';
export type { RunsChangedState, TenantStreamOptions } from './tenant-streams.ts';
