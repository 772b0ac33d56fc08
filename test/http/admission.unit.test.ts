/** Tenant caps count what a tenant holds elsewhere (the other replicas) with what it holds here. */
import { describe, expect, test } from 'vitest';
import { createAdmission } from '../../src/http/admission.ts';
import type { ConnectionLimits } from '../../src/http/connections.ts';

const limits = {
  maxSubscriptionsPerConnection: 100,
  maxSubscriptionsPerTenant: 5,
  maxConnectionsPerTenant: 3,
  maxConnectionsPerAddress: 0,
  subscribeRate: 1000,
  sendBufferBytes: 1 << 20,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  sendTimeoutMs: 30_000,
  connectionInitTimeoutMs: 3_000,
  pingIntervalMs: 12_000,
} satisfies ConnectionLimits;

describe('tenant caps over replicas', () => {
  test('what a tenant holds on the other replicas counts against its caps here; other tenants are not touched', () => {
    const elsewhere = { acme: { subscriptions: 4, connections: 2 } } as Record<string, { subscriptions: number; connections: number }>;
    const admission = createAdmission(limits, (tenant) => elsewhere[tenant] ?? { subscriptions: 0, connections: 0 });
    const connected = admission.connect('acme');
    expect(connected).toBeTypeOf('function');
    expect(String(admission.connect('acme'))).toMatch(
      /Too many open connections for this tenant \(limit 3, RUNPLANE_MAX_CONNECTIONS_PER_TENANT\)/,
    );
    const subscribed = admission.subscribe('acme');
    expect(subscribed).toBeTypeOf('function');
    expect(String(admission.subscribe('acme'))).toMatch(/limit 5, RUNPLANE_MAX_SUBSCRIPTIONS_PER_TENANT/);
    for (let i = 0; i < 5; i++) expect(admission.subscribe('globex')).toBeTypeOf('function');
    // The other replicas give places back: here they can be taken.
    elsewhere.acme = { subscriptions: 0, connections: 0 };
    expect(admission.subscribe('acme')).toBeTypeOf('function');
    expect([...admission.usageByTenant()]).toEqual([
      ['acme', { subscriptions: 2, connections: 1 }],
      ['globex', { subscriptions: 5, connections: 0 }],
    ]);
  });
});
