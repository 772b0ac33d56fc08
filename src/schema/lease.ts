import { z } from 'zod';
import { LeaseHeld } from '../domain/errors.ts';
import { MAX_LEASE_TTL_SECONDS } from '../domain/limits.ts';
import type { Lease } from '../domain/run.ts';
import { builder } from './builder.ts';
import { id, owner } from './inputs.ts';

export const LeaseRef = builder.objectRef<Lease>('Lease').implement({
  description: 'Who holds a unit of work, until when. Pass `token` to the resource you act on: it rejects smaller ones.',
  fields: (t) => ({
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
    resolve: (_, { unitId }, { tenant, stores }) => stores.leases.get(tenant, unitId),
  }),
);

const AcquireLeaseInput = builder.inputType('AcquireLeaseInput', {
  fields: (t) => ({
    unitId: t.id({ required: true }),
    owner: t.string({ required: true, description: 'Who takes the unit (a worker id).' }),
    ttlSeconds: t.int({ required: true, description: `How long the lease lasts unless renewed (1 to ${MAX_LEASE_TTL_SECONDS}).` }),
  }),
  validate: z.object({
    unitId: id,
    owner,
    ttlSeconds: z.number().int().min(1, 'must be at least 1').max(MAX_LEASE_TTL_SECONDS, `must be at most ${MAX_LEASE_TTL_SECONDS}`),
  }),
});

builder.mutationField('acquireLease', (t) =>
  t.field({
    type: LeaseRef,
    description: 'Takes the unit if it is free, its lease expired, or you hold it already; returns a new fencing token.',
    errors: { types: [LeaseHeld] },
    args: { input: t.arg({ type: AcquireLeaseInput, required: true }) },
    resolve: (_, { input }, { tenant, stores }) => stores.leases.acquire({ tenant, ...input }),
  }),
);
