/**
 * Every document the client sends. Each union member selects all of its fields, so a caller
 * branching on `__typename` has what the refusal carries (the last seq, the holder, the
 * remaining budget) without another read.
 */
import { graphql } from './typed.ts';

const BudgetFields = graphql(`fragment BudgetFields on Budget { id runId cap spent remaining version }`);
const RunFields = graphql(
  `fragment RunFields on Run { id task status version createdAt updatedAt eventShards budget { ...BudgetFields } claim { id runId holder token acquiredAt expiresAt version } }`,
  [BudgetFields],
);
const EventFields = graphql(`fragment EventFields on Event { id runId seq type payload createdAt origin late missingBefore { from to } }`);
const LeaseFields = graphql(`fragment LeaseFields on Lease { id unitId owner token acquiredAt expiresAt version }`);
const IdempotencyConflictFields = graphql(`fragment IdempotencyConflictFields on IdempotencyConflict { message key operation }`);
/** ClaimLost's holder and token are null when nobody holds the run: aliased, so they sit beside RunClaim's non-null ones. */
const ClaimLostFields = graphql(`fragment ClaimLostFields on ClaimLost { message runId currentHolder: holder currentToken: token reason }`);
const ClaimFields = graphql(`fragment ClaimFields on RunClaim { id runId holder token acquiredAt expiresAt version }`);
const RunNotFoundFields = graphql(`fragment RunNotFoundFields on RunNotFound { message runId }`);
const BudgetExceededFields = graphql(`fragment BudgetExceededFields on BudgetExceeded { message runId cap spent remaining requested }`);

export const CreateRun = graphql(
  `mutation CreateRun($input: CreateRunInput!) {
    createRun(input: $input) {
      __typename
      ...RunFields
      ... on RunAlreadyExists { message runId }
      ...IdempotencyConflictFields
    }
  }`,
  [RunFields, IdempotencyConflictFields],
);

export const AppendEvent = graphql(
  `mutation AppendEvent($input: AppendEventInput!) {
    appendEvent(input: $input) {
      __typename
      ...EventFields
      ... on SequenceConflict { message runId seq lastSeq }
      ...RunNotFoundFields
      ...BudgetExceededFields
      ...ClaimLostFields
      ...IdempotencyConflictFields
    }
  }`,
  [EventFields, ClaimLostFields, IdempotencyConflictFields, RunNotFoundFields, BudgetExceededFields],
);

export const ChargeBudget = graphql(
  `mutation ChargeBudget($input: ChargeBudgetInput!) {
    chargeBudget(input: $input) {
      __typename
      ...BudgetFields
      ...BudgetExceededFields
      ...RunNotFoundFields
      ...ClaimLostFields
      ...IdempotencyConflictFields
    }
  }`,
  [BudgetFields, ClaimLostFields, IdempotencyConflictFields, RunNotFoundFields, BudgetExceededFields],
);

export const TransitionRun = graphql(
  `mutation TransitionRun($input: TransitionRunInput!) {
    transitionRun(input: $input) {
      __typename
      ...RunFields
      ... on StatusConflict { message runId expected current currentVersion expectedVersion }
      ...RunNotFoundFields
      ...ClaimLostFields
      ...IdempotencyConflictFields
    }
  }`,
  [RunFields, ClaimLostFields, IdempotencyConflictFields, RunNotFoundFields],
);

export const AcquireLease = graphql(
  `mutation AcquireLease($input: AcquireLeaseInput!) {
    acquireLease(input: $input) {
      __typename
      ...LeaseFields
      ... on LeaseHeld { message unitId holder expiresAt }
      ...IdempotencyConflictFields
    }
  }`,
  [LeaseFields, IdempotencyConflictFields],
);

const LeaseLostFields = graphql(`fragment LeaseLostFields on LeaseLost { message unitId currentHolder currentToken }`);

export const RenewLease = graphql(
  `mutation RenewLease($input: RenewLeaseInput!) {
    renewLease(input: $input) { __typename ...LeaseFields ...LeaseLostFields ...IdempotencyConflictFields }
  }`,
  [LeaseFields, LeaseLostFields, IdempotencyConflictFields],
);

export const ReleaseLease = graphql(
  `mutation ReleaseLease($input: ReleaseLeaseInput!) {
    releaseLease(input: $input) { __typename ...LeaseFields ...LeaseLostFields ...IdempotencyConflictFields }
  }`,
  [LeaseFields, LeaseLostFields, IdempotencyConflictFields],
);

export const ReadRun = graphql(
  `query ReadRun($id: ID!, $consistent: Boolean, $first: Int) {
    run(id: $id, consistent: $consistent) {
      ...RunFields
      lastSeq
      events(first: $first) { edges { node { ...EventFields } } pageInfo { hasNextPage endCursor } }
    }
  }`,
  [RunFields, EventFields],
);

/** A run's last seq, read consistently: where "live from now" starts, exactly. */
export const LastSeq = graphql(`query LastSeq($id: ID!) { run(id: $id, consistent: true) { lastSeq } }`);

/** Events after a seq, in order, from the table: what fills a hole in a live feed. */
export const EventPage = graphql(
  `query EventPage($id: ID!, $afterSeq: Int!, $first: Int!) {
    run(id: $id, consistent: true) {
      events(afterSeq: $afterSeq, first: $first) { edges { node { ...EventFields } } pageInfo { hasNextPage } }
    }
  }`,
  [EventFields],
);

export const ReadLease = graphql(`query ReadLease($unitId: ID!) { lease(unitId: $unitId) { ...LeaseFields } }`, [LeaseFields]);

export const RunEvents = graphql(
  `subscription RunEvents($runId: ID!, $afterSeq: Int, $types: [String!]) {
    runEvents(runId: $runId, afterSeq: $afterSeq, types: $types) { ...EventFields }
  }`,
  [EventFields],
);

export const RunChanged = graphql(`subscription RunChanged($runId: ID!) { runChanged(runId: $runId) { ...RunFields } }`, [RunFields]);

export const LeaseChanged = graphql(`subscription LeaseChanged($unitId: ID!) { leaseChanged(unitId: $unitId) { ...LeaseFields } }`, [
  LeaseFields,
]);

const StatusConflictFields = graphql(
  `fragment StatusConflictFields on StatusConflict { message runId expected current currentVersion expectedVersion }`,
);

export const RequestApproval = graphql(
  `mutation RequestApproval($input: RequestApprovalInput!) {
    requestApproval(input: $input) {
      __typename
      ...RunFields
      ...StatusConflictFields
      ...RunNotFoundFields
      ...ClaimLostFields
      ...IdempotencyConflictFields
    }
  }`,
  [RunFields, StatusConflictFields, ClaimLostFields, IdempotencyConflictFields, RunNotFoundFields],
);

export const ClaimRun = graphql(
  `mutation ClaimRun($input: ClaimRunInput!) {
    claimRun(input: $input) {
      __typename
      ...ClaimFields
      ... on RunHeld { message runId holder expiresAt }
      ...RunNotFoundFields
      ...StatusConflictFields
      ...IdempotencyConflictFields
    }
  }`,
  [ClaimFields, StatusConflictFields, IdempotencyConflictFields, RunNotFoundFields],
);

export const RenewRunClaim = graphql(
  `mutation RenewRunClaim($input: RenewRunClaimInput!) { renewRunClaim(input: $input) { __typename ...ClaimFields ...ClaimLostFields } }`,
  [ClaimFields, ClaimLostFields],
);

export const ReleaseRunClaim = graphql(
  `mutation ReleaseRunClaim($input: ReleaseRunClaimInput!) { releaseRunClaim(input: $input) { __typename ...ClaimFields ...ClaimLostFields } }`,
  [ClaimFields, ClaimLostFields],
);

export const CancelRun = graphql(
  `mutation CancelRun($input: CancelRunInput!) {
    cancelRun(input: $input) {
      __typename
      ...RunFields
      ...StatusConflictFields
      ...RunNotFoundFields
      ...IdempotencyConflictFields
    }
  }`,
  [RunFields, StatusConflictFields, IdempotencyConflictFields, RunNotFoundFields],
);

export const ResolveApproval = graphql(
  `mutation ResolveApproval($input: ResolveApprovalInput!) {
    resolveApproval(input: $input) {
      __typename
      ...RunFields
      ...StatusConflictFields
      ...RunNotFoundFields
      ...IdempotencyConflictFields
    }
  }`,
  [RunFields, StatusConflictFields, IdempotencyConflictFields, RunNotFoundFields],
);

export const ListRuns = graphql(
  `query ListRuns($status: RunStatus, $first: Int, $after: String) {
    runs(status: $status, first: $first, after: $after) {
      edges { cursor node { ...RunFields lastSeq } }
      pageInfo { hasNextPage endCursor }
    }
  }`,
  [RunFields],
);

export const ListLeases = graphql(
  `query ListLeases($held: Boolean, $first: Int, $after: String) {
    leases(held: $held, first: $first, after: $after) {
      edges { cursor node { ...LeaseFields } }
      pageInfo { hasNextPage endCursor }
    }
  }`,
  [LeaseFields],
);

/** A page of a run's events by cursor, from the start (`first`/`after`) or the end (`last`/`before`), optionally of some types. */
export const RunEventPage = graphql(
  `query RunEventPage($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $afterSeq: Int, $types: [String!]) {
    run(id: $id) {
      events(first: $first, after: $after, last: $last, before: $before, afterSeq: $afterSeq, types: $types) {
        edges { cursor node { ...EventFields } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }
  }`,
  [EventFields],
);

export const RunsChanged = graphql(`subscription RunsChanged($status: RunStatus) { runsChanged(status: $status) { ...RunFields } }`, [
  RunFields,
]);

export const LeasesChanged = graphql(`subscription LeasesChanged { leasesChanged { ...LeaseFields } }`, [LeaseFields]);

export const Viewer = graphql(`query Viewer { viewer { tenant name canWrite } }`);

export const AppendOutput = graphql(
  `mutation AppendOutput($input: AppendOutputInput!) {
    appendOutput(input: $input) {
      __typename
      ... on OutputChunk { offset text final durable }
      ... on OffsetConflict { message length }
      ...RunNotFoundFields
      ...ClaimLostFields
    }
  }`,
  [ClaimLostFields, RunNotFoundFields],
);

export const OutputLengths = graphql(
  `query OutputLengths($id: ID!) { run(id: $id, consistent: true) { outputs { stream length final } } }`,
);

export const RunOutput = graphql(
  `subscription RunOutput($runId: ID!, $stream: String!, $afterOffset: Int) {
    runOutput(runId: $runId, stream: $stream, afterOffset: $afterOffset) { offset text final }
  }`,
);
