/**
 * Run claims: which worker holds a run, with a fencing token; cancelling a run. A fenced write
 * (appendEvent, chargeBudget, transitionRun, requestApproval with `fencingToken`) lands only
 * while that token is the run's live claim.
 */
import { z } from 'zod';
import { claimLiveAt } from '../domain/claim.ts';
import { ClaimLost, claimLostReasons, IdempotencyConflict, RunHeld, RunNotFound, StatusConflict } from '../domain/errors.ts';
import { MAX_LEASE_TTL_SECONDS } from '../domain/limits.ts';
import { isTerminal, type RunClaim, type RunStatus } from '../domain/run.ts';
import { builder } from './builder.ts';
import { ErrorInterface } from './errors.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { fencingToken, id, owner, text } from './inputs.ts';
import { RunRef } from './run.ts';
import { tableReads } from './table-reads.ts';

const MAX_REASON_LENGTH = 4096;

export const RunClaimRef = builder.objectRef<RunClaim>('RunClaim').implement({
  description:
    'Which worker holds a run, until when. Pass `token` as `fencingToken` to the run`s writes: once the claim is lost (expired, taken over, the run cancelled) they are refused.',
  fields: (t) => ({
    id: t.id({ description: "The claim's identity, for normalized caches: `<runId>:claim`.", resolve: (claim) => `${claim.runId}:claim` }),
    runId: t.exposeID('runId'),
    holder: t.exposeString('holder'),
    token: t.exposeInt('token', { description: 'Fencing token: larger than every token issued before for this run.' }),
    acquiredAt: t.expose('acquiredAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    version: t.exposeInt('version', { description: 'Grows by one with every change: of two states, the larger version is newer.' }),
  }),
});

/** The run's live claim at `at`, or null (never claimed, ended, run out, or the run finished). */
export const liveClaim = (status: RunStatus, claim: RunClaim | null | undefined, at: number) =>
  isTerminal(status) || status === 'STALLED' ? null : claimLiveAt(claim ?? null, at);

builder.objectType(RunHeld, {
  name: 'RunHeld',
  description: "Another worker's claim on the run is live.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof RunHeld,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    holder: t.exposeString('holder'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
  }),
});

const ClaimLostReasonEnum = builder.enumType('ClaimLostReason', {
  description:
    'EXPIRED: it ran out before it was renewed (the run may be STALLED); RELEASED: its holder released it; TAKEN_OVER: a newer claim was taken since; CANCELLED: the run was cancelled; FINISHED: the run reached a final status.',
  values: claimLostReasons,
});

builder.objectType(ClaimLost, {
  name: 'ClaimLost',
  description: "The claim (or fencing token) given is not the run's live claim; `reason` says why. Nothing was written.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ClaimLost,
  fields: (t) => ({
    runId: t.exposeID('runId'),
    holder: t.exposeString('holder', { nullable: true, description: 'Who holds the run now, if anyone.' }),
    token: t.exposeInt('token', { nullable: true, description: "The current holder's token, if anyone holds it." }),
    reason: t.expose('reason', { type: ClaimLostReasonEnum, description: 'Why the claim given is not the live one.' }),
  }),
});

const ttlSeconds = z.number().int().min(1, 'must be at least 1').max(MAX_LEASE_TTL_SECONDS, `must be at most ${MAX_LEASE_TTL_SECONDS}`);

const ClaimRunInput = builder.inputType('ClaimRunInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    holder: t.string({ required: true, description: 'Who takes the run (a worker id).' }),
    ttlSeconds: t.int({ required: true, description: `How long the claim lasts unless renewed (1 to ${MAX_LEASE_TTL_SECONDS}).` }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({ runId: id, holder: owner, ttlSeconds, idempotencyKey: id.optional().nullable() }),
});

builder.mutationField('claimRun', (t) =>
  t.field({
    type: RunClaimRef,
    description:
      'Takes the run for a worker if nobody holds it, its claim ran out, or the worker holds it already; returns a new, larger fencing token. A STALLED run is taken over: RUNNING again, with a `run.reclaimed` event (from, to). A finished run is refused with StatusConflict.',
    errors: { types: [RunHeld, RunNotFound, StatusConflict, IdempotencyConflict] },
    args: { input: t.arg({ type: ClaimRunInput, required: true }) },
    resolve: async (_, { input }, { tenant, stores }) => {
      const { claim } = await stores.runs.claim(
        { tenant, runId: input.runId, holder: input.holder, ttlSeconds: input.ttlSeconds },
        idempotencyOf(tenant, 'claimRun', input),
      );
      return claim;
    },
  }),
);

const RenewRunClaimInput = builder.inputType('RenewRunClaimInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    holder: t.string({ required: true }),
    token: t.int({ required: true }),
    ttlSeconds: t.int({ required: true, description: 'From now.' }),
  }),
  validate: z.object({ runId: id, holder: owner, token: fencingToken, ttlSeconds }),
});

builder.mutationField('renewRunClaim', (t) =>
  t.field({
    type: RunClaimRef,
    description: 'Extends your live claim; ClaimLost if it ran out, was taken over, or the run was cancelled.',
    errors: { types: [ClaimLost] },
    args: { input: t.arg({ type: RenewRunClaimInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) => stores.runs.renewClaim({ tenant, ...input }),
  }),
);

const ReleaseRunClaimInput = builder.inputType('ReleaseRunClaimInput', {
  fields: (t) => ({ runId: t.id({ required: true }), holder: t.string({ required: true }), token: t.int({ required: true }) }),
  validate: z.object({ runId: id, holder: owner, token: fencingToken }),
});

builder.mutationField('releaseRunClaim', (t) =>
  t.field({
    type: RunClaimRef,
    description:
      "Ends your live claim now: the run is free at once, and writes fenced by its token are refused from now on, also those already on their way. A claim that ran out is ClaimLost: its run is the stall watcher's.",
    errors: { types: [ClaimLost] },
    args: { input: t.arg({ type: ReleaseRunClaimInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) => stores.runs.releaseClaim({ tenant, ...input }),
  }),
);

const CancelRunInput = builder.inputType('CancelRunInput', {
  fields: (t) => ({
    runId: t.id({ required: true }),
    reason: t.string({ description: 'Why (recorded in the `run.cancelled` event).' }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({
    runId: id,
    reason: text(MAX_REASON_LENGTH, { multiline: true }).optional().nullable(),
    idempotencyKey: id.optional().nullable(),
  }),
});

builder.mutationField('cancelRun', (t) =>
  t.field({
    type: RunRef,
    description:
      "Moves any unfinished run to CANCELLED, appends `run.cancelled` (payload: { by: the cancelling key's name, reason, from, holder }) and ends its claim, in one transaction: the worker holding it learns it from runChanged, and its next fenced write is refused (ClaimLost).",
    errors: { types: [StatusConflict, RunNotFound, IdempotencyConflict] },
    args: { input: t.arg({ type: CancelRunInput, required: true }) },
    resolve: async (_, { input }, { tenant, stores, keyName }) => {
      const { run, claim } = await stores.runs.cancel(
        { tenant, runId: input.runId, by: keyName, reason: input.reason ?? null },
        idempotencyOf(tenant, 'cancelRun', input),
      );
      return { run, claim, consistent: true };
    },
  }),
);

builder.objectField(RunRef, 'claim', (t) =>
  t.field({
    type: RunClaimRef,
    nullable: true,
    description:
      "The worker holding the run now; null when nobody does (never claimed, released, run out, or the run stalled or finished). Read with the run's one Query.",
    // Read with the run, or with the other runs of a listing's page (a BatchGetItem per 50 runs).
    extensions: tableReads(1),
    resolve: async (p, _, { tenant, stores, reads }) => {
      // A run of a listing has none read with it: its claim is read with the others' of the page (one batch).
      const claim = p.claim !== undefined ? p.claim : (await stores.runs.headRows(tenant, p.run.id, reads)).claim;
      return liveClaim(p.run.status, claim, Date.now());
    },
  }),
);
