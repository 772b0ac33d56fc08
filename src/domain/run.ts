/** The run: an agent's unit of work, with its status, budget and event stream. */

export const runStatuses = ['RUNNING', 'WAITING_FOR_TOOL', 'AWAITING_APPROVAL', 'STALLED', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type RunStatus = (typeof runStatuses)[number];

export interface Run {
  id: string;
  task: string;
  status: RunStatus;
  /** Grows by one with every change to the run's metadata. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
  /** How many partition keys its events are spread over (fixed at creation; 1: the run's own partition). */
  eventShards: number;
}

export interface Budget {
  runId: string;
  cap: number;
  spent: number;
  remaining: number;
  /** Grows by one with every charge. */
  version: number;
}

/**
 * Who wrote an event: the server, for its own steps of a run (SERVER), or anyone else (CLIENT):
 * appendEvent, or a writer with access to the table. The server sets it; no input carries it.
 */
export type EventOrigin = 'SERVER' | 'CLIENT';

export interface RunEvent {
  runId: string;
  seq: number;
  type: string;
  payload: unknown;
  createdAt: Date;
  /** Absent: CLIENT (a value from before origins were recorded, as a row without one reads). */
  origin?: EventOrigin;
}

export const originOf = (event: RunEvent): EventOrigin => event.origin ?? 'CLIENT';

/** Seqs from `from` to `to`, both included. */
export interface SeqRange {
  from: number;
  to: number;
}

/** An event as a subscription hands it out. */
export interface DeliveredEvent extends RunEvent {
  /** Seqs the feed stepped over (not in the table after waiting for them) since the previous event it handed out. */
  missingBefore?: SeqRange[];
  /** Handed out after later seqs: it filled a hole the feed had stepped over. */
  late?: boolean;
}

/** Which worker holds a run: a lease on the run itself, kept in its partition. */
export interface RunClaim {
  runId: string;
  holder: string;
  /** Fencing token: larger than every token issued before for this run. */
  token: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** Grows by one with every change to the claim. */
  version: number;
  /**
   * Ended (released, the run cancelled, finished or stalled): never live again, whatever its
   * `expiresAt`, so a write fenced by its token and still on its way is refused when it arrives.
   */
  ended?: boolean;
  /** Why it ended, where the row says (rows written before this was kept say only that it ended). */
  endedBy?: ClaimEnd;
}

/** What ended a claim before it ran out. */
export type ClaimEnd = 'RELEASED' | 'CANCELLED' | 'FINISHED' | 'STALLED';

export interface Lease {
  unitId: string;
  owner: string;
  /** Fencing token: larger than every token issued before for this unit. */
  token: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** Grows by one with every change to the lease. */
  version: number;
}

const terminal: ReadonlySet<RunStatus> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/**
 * Where transitionRun may move a run. A run awaiting approval leaves it only through
 * resolveApproval (which records who decided: no agent can skip the decision) or cancelRun; a
 * stalled run only through claimRun (a worker takes it over) or cancelRun. Terminal statuses
 * go nowhere.
 */
const transitions: Record<RunStatus, readonly RunStatus[]> = {
  RUNNING: ['WAITING_FOR_TOOL', 'AWAITING_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED'],
  WAITING_FOR_TOOL: ['RUNNING', 'FAILED', 'CANCELLED'],
  AWAITING_APPROVAL: [],
  STALLED: [],
  COMPLETED: [],
  FAILED: [],
  CANCELLED: [],
};

/** Why a status has no transitionRun moves, when it is not terminal. */
export const leftOnlyBy: Partial<Record<RunStatus, string>> = {
  AWAITING_APPROVAL: 'resolveApproval or cancelRun',
  STALLED: 'claimRun (a worker takes it over) or cancelRun',
};

/** A claimed run in these statuses whose claim runs out is stalled: its worker is gone. */
export const stallable: ReadonlySet<RunStatus> = new Set(['RUNNING', 'WAITING_FOR_TOOL']);

export const initialStatus: RunStatus = 'RUNNING';

export function canTransition(from: RunStatus, to: RunStatus) {
  return transitions[from].includes(to);
}

export function isTerminal(status: RunStatus) {
  return terminal.has(status);
}

export function allowedTransitions(from: RunStatus) {
  return transitions[from];
}

/**
 * Event types only the server writes, each with the state change it records: appendEvent
 * refuses them, so a run's timeline never shows a decision, cancellation or takeover that did
 * not happen. Every other type is the agents' own (`run.created`, `run.completed`, ...).
 */
export const serverEventTypes = ['approval.requested', 'approval.resolved', 'run.cancelled', 'run.stalled', 'run.reclaimed'] as const;
export type ServerEventType = (typeof serverEventTypes)[number];

/**
 * What a type looks like to a reader: its words without separators (`.`, `_`, `:`, `/`, `-`),
 * in lower case, with the characters that look alike in a sans-serif font (I, l and 1; O and
 * 0; rn and m; vv and w) made one, and a doubled l single (`canceled` for `cancelled`).
 */
const lookOf = (type: string) =>
  type
    .replace(/[I1]/g, 'l')
    .toLowerCase()
    .replace(/[._:/-]+/g, '')
    .replace(/0/g, 'o')
    .replace(/rn/g, 'm')
    .replace(/vv/g, 'w')
    .replace(/l+/g, 'l');
const serverTypeLooks = new Set(serverEventTypes.map(lookOf));

/**
 * A type a reader would take for one of the server's own, differing only in case, separators
 * or letters that look alike (`Approval.Resolved`, `run_stalled`, `runstalled`, `approvaI.resolved`
 * with a capital I, `run.canceled`): refused alike. One with more words (`run.stalled.retry`)
 * is the agents' own.
 */
export const passesForServerEventType = (type: string) => serverTypeLooks.has(lookOf(type));
