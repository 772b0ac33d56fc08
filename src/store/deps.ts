import type { Change } from '../domain/change.ts';
import type { Logger } from '../lib/logger.ts';
import type { Documents } from '../table/documents.ts';
import type { ThrottleCounts, ThrottleRetry } from './throttles.ts';

/** What every store is built from. */
export interface StoreDeps {
  doc: Documents;
  tableName: string;
  /** The clock: lease expiry and timestamps (tests move it). */
  now: () => Date;
  retention: Retention;
  /** Write concurrent appends to one run together (default on). */
  groupCommit?: boolean;
  /** Where failures of background work go (default: consoleLogger); the server hands in its own. */
  log?: Logger;
  /**
   * Where each change a write made goes as it lands (the server's subscribers, and with replicas
   * the others'), before the stream brings it. Absent: subscribers learn of it from the stream.
   */
  publish?: (change: Change) => void;
  /** Where throughput throttles are counted, by operation (/metrics); absent: not counted. */
  throttles?: ThrottleCounts;
  /** How throttled writes are tried again (default THROTTLE_RETRY; tests shorten the waits). */
  throttleRetry?: ThrottleRetry;
}

/** How long rows stay before TTL removes them (reads treat them as absent from expiry on). */
export interface Retention {
  idempotencySeconds: number;
  /** After a run reaches a terminal status. */
  finishedRunSeconds: number;
  /** After a lease's end. */
  leaseSeconds: number;
}

/** How much a caller may still read: a request's response size limit (RUNPLANE_MAX_RESPONSE_BYTES). */
export interface ResponseLimit {
  /** @throws once the bytes read pass the limit */
  spend(bytes: number): void;
  /** A fresh limit of the same size (each result of a subscription is a response of its own). */
  fork(): ResponseLimit;
}
