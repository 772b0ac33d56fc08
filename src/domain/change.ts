/** What subscribers are told of: an event appended, a run, budget, claim or lease as it now is, output text. */
import type { OutputChunk } from './output.ts';
import type { Budget, Lease, Run, RunClaim, RunEvent } from './run.ts';

export type Change =
  | { kind: 'event'; tenant: string; runId: string; event: RunEvent }
  | { kind: 'run'; tenant: string; runId: string; run: Run }
  | { kind: 'budget'; tenant: string; runId: string; budget: Budget }
  | { kind: 'claim'; tenant: string; runId: string; claim: RunClaim }
  | { kind: 'lease'; tenant: string; unitId: string; lease: Lease }
  /** Text of a run's output stream: accepted (live) or stored (a chunk row); the same text may come both ways. */
  | { kind: 'output'; tenant: string; runId: string; chunk: OutputChunk };
