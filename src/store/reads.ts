/**
 * Who a table read is for. A request's reads are counted against its budget and take a place
 * among its tenant's reads in flight; a subscription's feeds read within their connection's
 * bound. Either way the place is taken per request sent to the table (a GetItem, one page of a
 * Query, a BatchGetItem), so what is counted is what is sent.
 */
import { TooManyReads } from '../domain/errors.ts';
import type { Release } from '../lib/fair-shares.ts';
import type { Documents } from '../table/documents.ts';
import type { ReadShares } from './read-shares.ts';

export type { Release };

export interface TableReads {
  /**
   * A place for one request to the table: its release, at once when there is room, else once
   * there is.
   * @throws when the reader may read no more (a request past its budget, a tenant past its queue)
   */
  begin(): Release | Promise<Release>;
}

/** `doc` with each of its sends placed and counted by `reads` (`doc` itself without any). */
export function metered(doc: Documents, reads: TableReads | undefined): Documents {
  if (!reads) return doc;
  const send = async (command: never, ...rest: never[]) => {
    const place = reads.begin();
    const release = typeof place === 'function' ? place : await place;
    try {
      return await (doc.send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
    } finally {
      release();
    }
  };
  return { send: send as Documents['send'] };
}

/**
 * A request's reads: at most `max` (RUNPLANE_MAX_REQUEST_READS), each taking a place among its
 * tenant's reads in flight. A class: a subscription forks one for every event it executes.
 */
export class RequestReads implements TableReads {
  private count = 0;

  constructor(
    private readonly tenant: string,
    private readonly shares: ReadShares,
    readonly max: number,
  ) {}

  /** @throws TooManyReads past `max`; ReadsWaiting when the tenant has too many reads waiting */
  begin() {
    if (this.count >= this.max) throw new TooManyReads(this.max);
    this.count++;
    return this.shares.acquire(this.tenant);
  }

  /** Reads made so far. */
  get made() {
    return this.count;
  }

  /** The same reader with a whole budget (each event of a subscription is executed as a request of its own). */
  fork() {
    return new RequestReads(this.tenant, this.shares, this.max);
  }
}
