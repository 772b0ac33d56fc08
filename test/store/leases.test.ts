/**
 * The two lease paths at the store: a request without an idempotency key is one conditional
 * update whose condition holds the rules; one with a key writes what domain/lease.ts decided.
 * The same script of commands, on the same clock, must come to the same leases both ways.
 */
import { describe, expect, test } from 'vitest';
import type { Lease } from '../../src/domain/run.ts';
import type { IdempotencyKey } from '../../src/store/index.ts';
import { uniqueName } from '../support/aws.ts';
import { storesOnFreshTable, TENANT } from './fixture.ts';

type Step =
  | { advanceMs: number }
  | { acquire: string; ttlSeconds: number }
  | { renew: string; token: 'current' | 'stale'; ttlSeconds: number }
  | { release: string; token: 'current' | 'stale' };

const script: Step[] = [
  { acquire: 'a', ttlSeconds: 10 },
  { acquire: 'b', ttlSeconds: 10 },
  { renew: 'a', token: 'current', ttlSeconds: 20 },
  { renew: 'a', token: 'stale', ttlSeconds: 20 },
  { acquire: 'a', ttlSeconds: 5 },
  { advanceMs: 25_000 },
  { renew: 'a', token: 'current', ttlSeconds: 5 },
  { acquire: 'b', ttlSeconds: 30 },
  { release: 'a', token: 'current' },
  { release: 'b', token: 'stale' },
  { release: 'b', token: 'current' },
  { acquire: 'a', ttlSeconds: 30 },
  { acquire: 'a', ttlSeconds: 30 },
];

describe('plain and keyed requests', () => {
  test('the same commands on the same clock come to the same leases and the same refusals', async () => {
    const { stores, clock } = await storesOnFreshTable();
    const start = clock.now();
    const run = async (keyed: boolean) => {
      clock.advance(start - clock.now());
      const unitId = uniqueName('unit');
      const key = (operation: string, request: unknown): IdempotencyKey | undefined =>
        keyed ? { tenant: TENANT, key: uniqueName('k'), operation, request } : undefined;
      let token = 0;
      const outcomes: unknown[] = [];
      const record = async (request: () => Promise<Lease>) => {
        try {
          const lease = await request();
          token = lease.token;
          outcomes.push({ owner: lease.owner, token: lease.token, expiresAt: lease.expiresAt.getTime() - start });
        } catch (err) {
          outcomes.push({ refused: (err as Error).name, holder: (err as { holder?: string }).holder });
        }
      };
      for (const step of script) {
        if ('advanceMs' in step) clock.advance(step.advanceMs);
        else if ('acquire' in step) {
          const input = { tenant: TENANT, unitId, owner: step.acquire, ttlSeconds: step.ttlSeconds };
          await record(() => stores.leases.acquire(input, key('acquireLease', input)));
        } else if ('renew' in step) {
          const input = {
            tenant: TENANT,
            unitId,
            owner: step.renew,
            token: step.token === 'current' ? token : token - 1,
            ttlSeconds: step.ttlSeconds,
          };
          await record(() => stores.leases.renew(input, key('renewLease', input)));
        } else {
          const input = { tenant: TENANT, unitId, owner: step.release, token: step.token === 'current' ? token : token - 1 };
          await record(() => stores.leases.release(input, key('releaseLease', input)));
        }
      }
      return outcomes;
    };
    const plain = await run(false);
    const keyed = await run(true);
    expect(keyed).toEqual(plain);
    // The script means something: it was refused, and it took the unit over.
    expect(plain.filter((o) => (o as { refused?: string }).refused)).toHaveLength(5);
    expect(new Set(plain.map((o) => (o as { owner?: string }).owner).filter(Boolean))).toEqual(new Set(['a', 'b']));
  });
});
