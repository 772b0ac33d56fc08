/** Who the caller is to this API: a dashboard shows a read-only key no action it would be refused. */
import type { Role } from '../domain/principal.ts';
import { builder } from './builder.ts';

const ViewerRef = builder.objectRef<{ tenant: string; role: Role }>('Viewer').implement({
  description: "The caller's API key as the server sees it.",
  fields: (t) => ({
    tenant: t.exposeString('tenant', { description: 'Whose runs and units this key reaches.' }),
    canWrite: t.boolean({ description: 'false for a read-only (`:read`) key: mutations are refused.', resolve: (v) => v.role === 'write' }),
  }),
});

builder.queryField('viewer', (t) =>
  t.field({
    type: ViewerRef,
    resolve: (_, __, { tenant, role }) => ({ tenant, role }),
  }),
);
