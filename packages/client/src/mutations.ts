/**
 * The API's mutations, each returning its result union as it is (branch on `__typename`;
 * a refusal is a value, never thrown). Each call gets one idempotency key, generated unless
 * given, and every retry of it sends that same key: the server applies it once.
 */
import type { Document, ResultOf, ValidDocument, VariablesOf } from './graphql.ts';
import { type HttpConnection, send } from './http.ts';
import type { Notice } from './notices.ts';
import {
  AcquireLease,
  AppendEvent,
  CancelRun,
  ChargeBudget,
  ClaimRun,
  CreateRun,
  ReleaseLease,
  ReleaseRunClaim,
  RenewLease,
  RenewRunClaim,
  RequestApproval,
  ResolveApproval,
  TransitionRun,
} from './operations.ts';
import type { RetryPolicy } from './retry.ts';

export interface CallOptions {
  signal?: AbortSignal;
  /** This call's retry policy (over the client's); `false`: sent once. */
  retry?: Partial<RetryPolicy> | false;
}

type Input<D> = VariablesOf<D> extends { input: infer I } ? I : never;

export type CreateRunInput = Input<typeof CreateRun>;
export type AppendEventInput = Input<typeof AppendEvent>;
export type ChargeBudgetInput = Input<typeof ChargeBudget>;
export type TransitionRunInput = Input<typeof TransitionRun>;
export type AcquireLeaseInput = Input<typeof AcquireLease>;
export type RenewLeaseInput = Input<typeof RenewLease>;
export type ReleaseLeaseInput = Input<typeof ReleaseLease>;
export type RequestApprovalInput = Input<typeof RequestApproval>;
export type ResolveApprovalInput = Input<typeof ResolveApproval>;
export type ClaimRunInput = Input<typeof ClaimRun>;
export type RenewRunClaimInput = Input<typeof RenewRunClaim>;
export type ReleaseRunClaimInput = Input<typeof ReleaseRunClaim>;
export type CancelRunInput = Input<typeof CancelRun>;

export type CreateRunResult = ResultOf<typeof CreateRun>['createRun'];
export type AppendEventResult = ResultOf<typeof AppendEvent>['appendEvent'];
export type ChargeBudgetResult = ResultOf<typeof ChargeBudget>['chargeBudget'];
export type TransitionRunResult = ResultOf<typeof TransitionRun>['transitionRun'];
export type AcquireLeaseResult = ResultOf<typeof AcquireLease>['acquireLease'];
export type RenewLeaseResult = ResultOf<typeof RenewLease>['renewLease'];
export type ReleaseLeaseResult = ResultOf<typeof ReleaseLease>['releaseLease'];
export type RequestApprovalResult = ResultOf<typeof RequestApproval>['requestApproval'];
export type ResolveApprovalResult = ResultOf<typeof ResolveApproval>['resolveApproval'];
export type ClaimRunResult = ResultOf<typeof ClaimRun>['claimRun'];
export type RenewRunClaimResult = ResultOf<typeof RenewRunClaim>['renewRunClaim'];
export type ReleaseRunClaimResult = ResultOf<typeof ReleaseRunClaim>['releaseRunClaim'];
export type CancelRunResult = ResultOf<typeof CancelRun>['cancelRun'];

export interface Mutations {
  createRun(input: CreateRunInput, options?: CallOptions): Promise<CreateRunResult>;
  appendEvent(input: AppendEventInput, options?: CallOptions): Promise<AppendEventResult>;
  chargeBudget(input: ChargeBudgetInput, options?: CallOptions): Promise<ChargeBudgetResult>;
  transitionRun(input: TransitionRunInput, options?: CallOptions): Promise<TransitionRunResult>;
  acquireLease(input: AcquireLeaseInput, options?: CallOptions): Promise<AcquireLeaseResult>;
  renewLease(input: RenewLeaseInput, options?: CallOptions): Promise<RenewLeaseResult>;
  releaseLease(input: ReleaseLeaseInput, options?: CallOptions): Promise<ReleaseLeaseResult>;
  /** RUNNING -> AWAITING_APPROVAL with an `approval.requested` event, together. */
  requestApproval(input: RequestApprovalInput, options?: CallOptions): Promise<RequestApprovalResult>;
  /** AWAITING_APPROVAL -> RUNNING (approved) or FAILED (rejected) with an `approval.resolved` event; a racing approver gets StatusConflict. */
  resolveApproval(input: ResolveApprovalInput, options?: CallOptions): Promise<ResolveApprovalResult>;
  /** Takes the run for a worker (a STALLED one is taken over): a RunClaim with a fencing token, or RunHeld. */
  claimRun(input: ClaimRunInput, options?: CallOptions): Promise<ClaimRunResult>;
  /** Extends your claim; ClaimLost once it is not yours. Safe to repeat: it carries no key. */
  renewRunClaim(input: RenewRunClaimInput, options?: CallOptions): Promise<RenewRunClaimResult>;
  /** Ends your claim now. Safe to repeat: it carries no key. */
  releaseRunClaim(input: ReleaseRunClaimInput, options?: CallOptions): Promise<ReleaseRunClaimResult>;
  /** Any unfinished run to CANCELLED, its claim ended: the worker holding it is told, and its fenced writes refused. */
  cancelRun(input: CancelRunInput, options?: CallOptions): Promise<CancelRunResult>;
}

/** A fresh idempotency key: 128 random bits (getRandomValues works in every browser context, randomUUID does not). */
export function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `rp-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export function createMutations(http: HttpConnection, retry: RetryPolicy, onNotice: (notice: Notice) => void): Mutations {
  function mutation<D extends Document, F extends keyof ResultOf<D>>(document: D & ValidDocument<D>, field: F) {
    return async (input: Input<D>, options?: CallOptions): Promise<ResultOf<D>[F]> => {
      const given = input as { idempotencyKey?: string | null };
      const variables = { input: { ...given, idempotencyKey: given.idempotencyKey ?? newIdempotencyKey() } } as VariablesOf<D>;
      const policy = options?.retry === false ? false : { ...retry, ...options?.retry };
      const data = await send(http, document, variables, { signal: options?.signal, retry: policy, onNotice });
      return data[field];
    };
  }
  /** A mutation that is safe to repeat as it is (a holder's renew or release): sent with no key, retried alike. */
  function repeatable<D extends Document, F extends keyof ResultOf<D>>(document: D & ValidDocument<D>, field: F) {
    return async (input: Input<D>, options?: CallOptions): Promise<ResultOf<D>[F]> => {
      const policy = options?.retry === false ? false : { ...retry, ...options?.retry };
      const data = await send(http, document, { input } as VariablesOf<D>, { signal: options?.signal, retry: policy, onNotice });
      return data[field];
    };
  }
  return {
    createRun: mutation(CreateRun, 'createRun'),
    appendEvent: mutation(AppendEvent, 'appendEvent'),
    chargeBudget: mutation(ChargeBudget, 'chargeBudget'),
    transitionRun: mutation(TransitionRun, 'transitionRun'),
    acquireLease: mutation(AcquireLease, 'acquireLease'),
    renewLease: mutation(RenewLease, 'renewLease'),
    releaseLease: mutation(ReleaseLease, 'releaseLease'),
    requestApproval: mutation(RequestApproval, 'requestApproval'),
    resolveApproval: mutation(ResolveApproval, 'resolveApproval'),
    claimRun: mutation(ClaimRun, 'claimRun'),
    renewRunClaim: repeatable(RenewRunClaim, 'renewRunClaim'),
    releaseRunClaim: repeatable(ReleaseRunClaim, 'releaseRunClaim'),
    cancelRun: mutation(CancelRun, 'cancelRun'),
  };
}
