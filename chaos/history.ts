/**
 * What every client asked and was told, in order, with times: the record the checkers
 * read. An operation ends acknowledged (the server answered with its effect), refused
 * (answered with a domain refusal: nothing applied), or unknown (no usable answer: it may
 * or may not have been applied).
 */
export type Outcome = 'acknowledged' | 'refused' | 'unknown';

export interface Operation {
  client: string;
  kind: 'append' | 'charge' | 'acquire' | 'renew' | 'release' | 'claim' | 'renewClaim' | 'releaseClaim' | 'close';
  input: Record<string, unknown>;
  /** performance.now() at the first send and at the final answer. */
  start: number;
  end: number;
  /** Date.now() at the first send: comparable with the times servers put in answers (one machine). */
  sentAt: number;
  outcome: Outcome;
  /** The answer's data (acknowledged or refused). */
  result?: Record<string, unknown>;
  /** Requests sent for this operation (retries included). */
  attempts: number;
  /** Why the last attempt got no usable answer. */
  failure?: string;
}

export class History {
  readonly operations: Operation[] = [];
  /** Every HTTP request sent, retries included. */
  requests = 0;
  /** Answers that were errors the server should never give ("Unexpected error." and the like). */
  readonly unexpected: string[] = [];

  add(operation: Operation) {
    this.operations.push(operation);
  }

  count(kind: Operation['kind'], outcome: Outcome) {
    return this.operations.filter((o) => o.kind === kind && o.outcome === outcome).length;
  }

  get acknowledgedWrites() {
    return this.operations.filter((o) => o.outcome === 'acknowledged').length;
  }
}
