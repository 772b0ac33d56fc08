/**
 * Fault injection for tests. Nothing is injected unless a rule is added in code.
 * A rule matches operations by name; it fails a fraction of them (`probability`), or the
 * next `times` of them (after letting `skip` through), with a DynamoDB error, and/or delays
 * them by `latencyMs`.
 */
import { EngineError, errors } from './errors.ts';

export const faultErrors = {
  ProvisionedThroughputExceededException: () =>
    new EngineError(
      400,
      'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
      'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
    ),
  ThrottlingException: () =>
    new EngineError(400, 'com.amazon.coral.availability#ThrottlingException', 'Rate of requests exceeds the allowed throughput.'),
  RequestLimitExceeded: () =>
    new EngineError(
      400,
      'com.amazonaws.dynamodb.v20120810#RequestLimitExceeded',
      'Throughput exceeds the current throughput limit for your account.',
    ),
  /** What DynamoDB Streams answers when GetRecords is called too often. */
  LimitExceededException: () => new EngineError(400, 'com.amazonaws.dynamodb.v20120810#LimitExceededException', 'Rate exceeded for shard.'),
  TransactionConflictException: () => errors.transactionConflict(),
  InternalServerError: () => errors.internal(),
  /** A shard or stream that vanished (DynamoDB Streams), or a table that did. */
  ResourceNotFoundException: () => errors.resourceNotFound('Requested resource not found'),
} as const;

export type FaultError = keyof typeof faultErrors;

export interface FaultRule {
  /** Operation names (`PutItem`, `GetRecords`, `TransactWriteItems`, ...), or '*' for all. */
  operations: string[] | '*';
  error?: FaultError;
  /** Added before the operation runs (and before the error, if any). */
  latencyMs?: number;
  /** Fraction of matching calls affected, 0..1 (default 1). */
  probability?: number;
  /** Affect only the next N matching calls (default: every one). */
  times?: number;
  /** Let the first N matching calls through untouched (to fail a later step of a flow). */
  skip?: number;
  /**
   * Fail after the operation was applied, as when a response is lost on the way back:
   * the write happened, the client sees an error (and the SDK may resend it).
   */
  after?: boolean;
  /**
   * A stalled batch: a write (single or transactional) or TransactGetItems waits this long
   * after taking its item locks, holding them. Removing the rule ends the waits at once.
   */
  lockedLatencyMs?: number;
}

/** What a call is to suffer besides an error thrown before it runs. */
export interface AppliedFaults {
  /** The error to answer once the operation has run (`after` rules). */
  after?: EngineError;
  /** Waits out `lockedLatencyMs` (or until its rule is removed); to call once the locks are held. */
  stall?: () => Promise<void>;
}

export interface InjectedFault {
  /** How many calls this rule has affected so far. */
  readonly hits: number;
  remove(): void;
  [Symbol.dispose](): void;
}

type ActiveRule = FaultRule & { hits: number; seen: number; endStalls: Set<() => void> };

export class Faults {
  private readonly rules = new Set<ActiveRule>();

  constructor(private readonly random: () => number = Math.random) {}

  /** Adds a rule; remove it (or `using` it) to stop. */
  inject(rule: FaultRule): InjectedFault {
    if (rule.error && !Object.hasOwn(faultErrors, rule.error)) throw new Error(`unknown fault error ${rule.error}`);
    if (rule.probability !== undefined && !(rule.probability >= 0 && rule.probability <= 1)) {
      throw new Error(`fault probability must be within 0..1, got ${rule.probability}`);
    }
    if (rule.skip !== undefined && !(Number.isInteger(rule.skip) && rule.skip >= 0))
      throw new Error(`fault skip must be a whole number, got ${rule.skip}`);
    if (rule.lockedLatencyMs !== undefined && !(rule.lockedLatencyMs >= 0)) {
      throw new Error(`fault lockedLatencyMs must be 0 or more, got ${rule.lockedLatencyMs}`);
    }
    const active: ActiveRule = { ...rule, hits: 0, seen: 0, endStalls: new Set() };
    this.rules.add(active);
    const remove = () => {
      this.rules.delete(active);
      for (const end of active.endStalls) end();
    };
    return {
      get hits() {
        return active.hits;
      },
      remove,
      [Symbol.dispose]: remove,
    };
  }

  clear() {
    for (const rule of this.rules) for (const end of rule.endStalls) end();
    this.rules.clear();
  }

  /**
   * Applies the rules matching `operation`: waits out added latency, then throws an injected
   * error. Returns what is left to suffer once the operation runs.
   */
  async apply(operation: string, body?: Record<string, unknown>): Promise<AppliedFaults> {
    if (this.rules.size === 0) return {};
    // Decide which rules fire before waiting on any latency, so `times` counts calls exactly.
    const fired: ActiveRule[] = [];
    for (const rule of this.rules) {
      if (rule.operations !== '*' && !rule.operations.includes(operation)) continue;
      if (++rule.seen <= (rule.skip ?? 0)) continue;
      if (this.random() >= (rule.probability ?? 1)) continue;
      rule.hits++;
      if (rule.times !== undefined && rule.hits >= rule.times) this.rules.delete(rule);
      fired.push(rule);
    }
    const latency = fired.reduce((sum, rule) => sum + (rule.latencyMs ?? 0), 0);
    if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
    const afterwards = fired.find((rule) => rule.error && rule.after)?.error;
    const error = fired.find((rule) => rule.error && !rule.after)?.error;
    const stalling = fired.find((rule) => rule.lockedLatencyMs);
    if (!error) {
      return { after: afterwards ? faultErrors[afterwards]() : undefined, stall: stalling && (() => stall(stalling)) };
    }
    if (error === 'TransactionConflictException' && operation === 'TransactWriteItems') {
      // Between transactions DynamoDB reports a conflict as a cancellation reason.
      const count = Array.isArray(body?.TransactItems) ? body.TransactItems.length : 1;
      const reasons = Array.from({ length: Math.max(count, 1) }, (_, i) =>
        i === 0 ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' } : { Code: 'None' },
      );
      throw errors.transactionCanceled(reasons);
    }
    throw faultErrors[error]();
  }
}

/** Waits the rule's lockedLatencyMs, or less if the rule is removed meanwhile. */
function stall(rule: ActiveRule) {
  return new Promise<void>((resolve) => {
    const end = () => {
      clearTimeout(timer);
      rule.endStalls.delete(end);
      resolve();
    };
    const timer = setTimeout(end, rule.lockedLatencyMs);
    rule.endStalls.add(end);
  });
}
