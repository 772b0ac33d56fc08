/** Who the caller is to this API: a dashboard shows a read-only key no action it would be refused. */
import type { Role } from '../domain/principal.ts';
import { builder } from './builder.ts';

const ViewerRef = builder.objectRef<{ tenant: string; role: Role; name: string }>('Viewer').implement({
  description: "The caller's API key as the server sees it.",
  fields: (t) => ({
    tenant: t.exposeString('tenant', { description: 'Whose runs and units this key reaches.' }),
    name: t.exposeString('name', {
      description:
        "The key's name (`key=tenant:role:name`; unnamed keys: `key-` and 8 hex digits of the key's SHA-256): what the server records as who decided an approval or cancelled a run.",
    }),
    canWrite: t.boolean({ description: 'false for a read-only (`:read`) key: mutations are refused.', resolve: (v) => v.role === 'write' }),
  }),
});

builder.queryField('viewer', (t) =>
  t.field({
    type: ViewerRef,
    resolve: (_, __, { tenant, role, keyName }) => ({ tenant, role, name: keyName }),
  }),
);
