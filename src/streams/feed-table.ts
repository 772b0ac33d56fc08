/**
 * The table as one subscription's feed reads it. Every read waits for a place among its
 * connection's reads (SendBuffer.read: a few at once per connection, each holding up to a page
 * until its rows are queued or dropped) and, per request sent to the table, for a place among
 * its tenant's reads in flight. Feeds are given this, never the stores, so a feed cannot read
 * around either bound; and it is bound to the feed's tenant, so it cannot read another's rows.
 */
import type { Budget, Lease } from '../domain/run.ts';
import type { SendBuffer } from '../lib/send-buffer.ts';
import type { EventPageQuery } from '../store/events/index.ts';
import type { ReadShares, Stores, TableReads } from '../store/index.ts';
import type { RunSnapshot } from '../store/runs/index.ts';

type Page = Awaited<ReturnType<Stores['events']['page']>>;
type StoredOutput = Awaited<ReturnType<Stores['outputs']['read']>>;

export interface FeedTable {
  /** A page of the run's events, as `query` asks once a place is taken (undefined from it: nothing would fit now, nothing read). */
  events(query: () => Omit<EventPageQuery, 'tenant' | 'reads'> | undefined): Promise<Page | undefined>;
  /** The run's last seq (0 for none), strongly consistent. */
  lastSeq(runId: string): Promise<number>;
  /** The run's head (metadata, budget, claim), strongly consistent; null when it does not exist. */
  runState(runId: string): Promise<RunSnapshot | null>;
  budget(runId: string): Promise<Budget | null>;
  lease(unitId: string): Promise<Lease | null>;
  /** A stream's stored text from `offset`, at most `maxBytes()` of it, judged once a place is taken (undefined from it: nothing would fit now, nothing read). */
  output(runId: string, stream: string, offset: number, maxBytes: () => number | undefined): Promise<StoredOutput | undefined>;
}

export function feedTable(stores: Stores, shares: ReadShares, tenant: string, sendBuffer: SendBuffer): FeedTable {
  const reads: TableReads = { begin: () => shares.acquire(tenant) };
  const read = <T>(run: () => Promise<T>) => sendBuffer.read(run);
  return {
    events: (query) =>
      read(async () => {
        const asked = query();
        return asked && stores.events.page({ ...asked, tenant, reads });
      }),
    lastSeq: (runId) => read(() => stores.events.lastSeq(tenant, runId, undefined, reads)),
    runState: (runId) => read(() => stores.runs.read(tenant, runId, { consistent: true, eventLimit: 0, reads })),
    budget: (runId) => read(() => stores.budgets.get(tenant, runId, true, reads)),
    lease: (unitId) => read(() => stores.leases.read(tenant, unitId, reads)),
    output: (runId, stream, offset, maxBytes) =>
      read(async () => {
        const most = maxBytes();
        return most === undefined ? undefined : stores.outputs.read(tenant, runId, stream, offset, { maxBytes: most, reads });
      }),
  };
}
