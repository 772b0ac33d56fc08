import { z } from 'zod';
import { IdempotencyConflict, LeaseHeld, LeaseLost } from '../domain/errors.ts';
import { DEFAULT_PAGE_SIZE, MAX_LEASE_TTL_SECONDS } from '../domain/limits.ts';
import type { Lease } from '../domain/run.ts';
import { LISTING_PAGES_PER_SHARD, LISTING_SHARDS } from '../store/listing-pages.ts';
import { builder } from './builder.ts';
import { idempotencyKeyDescription, idempotencyOf } from './idempotency.ts';
import { id, owner } from './inputs.ts';
import { listingConnection, listingPageSize, shortPagesDescription } from './listing.ts';
import { plainRead } from './plain-read.ts';
import { tableReads } from './table-reads.ts';

export const LeaseRef = builder.objectRef<Lease>('Lease').implement({
  description: 'Who holds a unit of work, until when. Pass `token` to the resource you act on: it rejects smaller ones.',
  fields: (t) => ({
    id: t.id({
      description: "The lease's identity, for normalized caches (Apollo, urql): its unit's id (one lease row per unit, whoever holds it).",
      resolve: (lease) => lease.unitId,
      extensions: plainRead,
    }),
    unitId: t.exposeID('unitId'),
    owner: t.exposeString('owner'),
    token: t.exposeInt('token', { description: 'Fencing token: larger than every token issued before for this unit.' }),
    acquiredAt: t.expose('acquiredAt', { type: 'DateTime' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    version: t.exposeInt('version', { description: 'Grows by one with every change: of two states, the larger version is newer.' }),
  }),
});

builder.queryField('lease', (t) =>
  t.field({
    type: LeaseRef,
    nullable: true,
    description: 'The live lease on a unit; null when it is free or its lease expired. Strongly consistent.',
    args: { unitId: t.arg.id({ required: true, validate: id }) },
    resolve: (_, { unitId }, { tenant, stores, reads }) => stores.leases.get(tenant, unitId, reads),
    extensions: tableReads(1),
  }),
);

const LeaseConnection = builder.connectionObject({ type: LeaseRef, name: 'LeaseConnection' }, { name: 'LeaseEdge' });

builder.queryField('leases', (t) =>
  t.field({
    type: LeaseConnection,
    description: `The tenant's units and their leases (live or not), by unit id, paged by cursor. Read from an index: eventually consistent (a unit leased a moment ago may show a moment later); use \`lease\` before a decision. ${shortPagesDescription}`,
    // A few Queries of each listing shard.
    extensions: tableReads(LISTING_SHARDS * LISTING_PAGES_PER_SHARD),
    args: {
      held: t.arg.boolean({
        description: 'true: only units whose lease is live now; false: only units whose lease expired or was released.',
      }),
      first: t.arg.int({ description: `Page size (default ${DEFAULT_PAGE_SIZE}, at most RUNPLANE_MAX_PAGE_SIZE: 500 unless configured).` }),
      after: t.arg.string(),
    },
    resolve: async (_, args, { tenant, stores, limits, reads }) => {
      const first = listingPageSize(args.first, limits.maxPageSize);
      const page = await stores.leaseList.list({ tenant, held: args.held ?? undefined, first, after: args.after ?? undefined, reads });
      const edges = page.leases.map(({ lease, cursor }) => ({ cursor, node: lease }));
      return listingConnection(edges, page, args.after);
    },
  }),
);

const ttlSeconds = z.number().int().min(1, 'must be at least 1').max(MAX_LEASE_TTL_SECONDS, `must be at most ${MAX_LEASE_TTL_SECONDS}`);
const token = z.number().int().min(1, 'must be at least 1');

const AcquireLeaseInput = builder.inputType('AcquireLeaseInput', {
  fields: (t) => ({
    unitId: t.id({ required: true }),
    owner: t.string({ required: true, description: 'Who takes the unit (a worker id).' }),
    ttlSeconds: t.int({ required: true, description: `How long the lease lasts unless renewed (1 to ${MAX_LEASE_TTL_SECONDS}).` }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({ unitId: id, owner, ttlSeconds, idempotencyKey: id.optional().nullable() }),
});

builder.mutationField('acquireLease', (t) =>
  t.field({
    type: LeaseRef,
    description: 'Takes the unit if it is free, its lease expired, or you hold it already; returns a new, larger fencing token.',
    errors: { types: [LeaseHeld, IdempotencyConflict] },
    args: { input: t.arg({ type: AcquireLeaseInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) =>
      stores.leases.acquire(
        { tenant, unitId: input.unitId, owner: input.owner, ttlSeconds: input.ttlSeconds },
        idempotencyOf(tenant, 'acquireLease', input),
      ),
  }),
);

const RenewLeaseInput = builder.inputType('RenewLeaseInput', {
  fields: (t) => ({
    unitId: t.id({ required: true }),
    owner: t.string({ required: true }),
    token: t.int({ required: true, description: 'The fencing token your acquire returned.' }),
    ttlSeconds: t.int({ required: true, description: 'How long from now the lease lasts.' }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({ unitId: id, owner, token, ttlSeconds, idempotencyKey: id.optional().nullable() }),
});

builder.mutationField('renewLease', (t) =>
  t.field({
    type: LeaseRef,
    description: 'Extends your live lease (same token). Refused with LeaseLost if it expired, was released, or is held with another token.',
    errors: { types: [LeaseLost, IdempotencyConflict] },
    args: { input: t.arg({ type: RenewLeaseInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) =>
      stores.leases.renew(
        { tenant, unitId: input.unitId, owner: input.owner, token: input.token, ttlSeconds: input.ttlSeconds },
        idempotencyOf(tenant, 'renewLease', input),
      ),
  }),
);

const ReleaseLeaseInput = builder.inputType('ReleaseLeaseInput', {
  fields: (t) => ({
    unitId: t.id({ required: true }),
    owner: t.string({ required: true }),
    token: t.int({ required: true, description: 'The fencing token your acquire returned.' }),
    idempotencyKey: t.string({ description: idempotencyKeyDescription }),
  }),
  validate: z.object({ unitId: id, owner, token, idempotencyKey: id.optional().nullable() }),
});

builder.mutationField('releaseLease', (t) =>
  t.field({
    type: LeaseRef,
    description:
      'Ends your lease now, so that another worker can acquire the unit at once. Refused with LeaseLost if you no longer hold it with that token.',
    errors: { types: [LeaseLost, IdempotencyConflict] },
    args: { input: t.arg({ type: ReleaseLeaseInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) =>
      stores.leases.release(
        { tenant, unitId: input.unitId, owner: input.owner, token: input.token },
        idempotencyOf(tenant, 'releaseLease', input),
      ),
  }),
);
