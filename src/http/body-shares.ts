/**
 * Request bodies being read, shared fairly between tenants (lib/fair-shares.ts): at most
 * `total` bytes of them at once for the whole process and `perTenant` for one tenant, by their
 * Content-Length. A body past its tenant's share is not read until room frees up: its socket
 * stays paused, so the bytes wait in the client's and the kernel's buffers, not here.
 *
 * Why: Node accepts one new connection per turn of its event loop (libuv 1.46 and later), and
 * a turn reads and parses every body that arrived during it. One tenant's dozens of large
 * bodies at once made each turn last 50 to 150 ms, and another tenant's new connection waited
 * in the kernel's queue behind the hog's, one turn each: seconds. With a tenant's bodies read
 * a few at a time, a turn stays short whatever one tenant sends.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FairShares, type Release } from '../lib/fair-shares.ts';

/** Requests one tenant may have waiting for room for their bodies (each holds a connection); one more is refused. */
export const MAX_WAITING_BODIES = 64;

export class BodiesWaiting extends Error {
  constructor(readonly waiting: number) {
    super(
      `This tenant has ${waiting} requests waiting for their bodies to be read already (RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT): retry in a moment`,
    );
  }
}

/** The pool of request bodies being read: `total` bytes in all, `perTenant` for one tenant. */
export const bodyShares = (total: number, perTenant: number) =>
  new FairShares({
    total,
    perTenant,
    maxWaitingPerTenant: MAX_WAITING_BODIES,
    refuse: () => new BodiesWaiting(MAX_WAITING_BODIES),
  });

/**
 * Calls `handle` once the request's body has room among its tenant's (at once when it fits).
 * Its room frees up when the body has been read (it is parsed in that same turn) or the
 * answer ends first (a request without a body, a refusal, a client gone).
 * @throws BodiesWaiting when its tenant has too many waiting already
 */
export function admitBody(shares: FairShares, tenant: string, req: IncomingMessage, res: ServerResponse, handle: () => void) {
  const bytes = Math.max(1, Number(req.headers['content-length'] ?? 0));
  const place = shares.acquire(tenant, bytes);
  const start = (release: Release) => {
    // An 'end' listener does not start the body flowing: whoever handles the request reads it.
    req.once('end', release);
    res.once('close', release);
    // Gone while it waited: nothing to read.
    if (req.socket.destroyed) return release();
    handle();
  };
  if (typeof place === 'function') start(place);
  else void place.then(start);
}
