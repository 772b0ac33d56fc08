/** What the tenant-wide listings (`runs`, `leases`) share: their page size rule and their connection's shape. */
import { DEFAULT_PAGE_SIZE } from '../domain/limits.ts';
import { badInput } from './error-codes.ts';

/** @throws BAD_USER_INPUT for a page size outside 0..maxPageSize */
export function listingPageSize(first: number | null | undefined, maxPageSize: number) {
  const size = first ?? DEFAULT_PAGE_SIZE;
  if (size < 0 || size > maxPageSize) throw badInput(`first: must be from 0 to ${maxPageSize} (RUNPLANE_MAX_PAGE_SIZE)`);
  return size;
}

/**
 * A Relay connection of one listing page; a page after a cursor has pages before it. Its
 * `endCursor` is the page's own: with no edges it still goes on from where the page's reads stopped.
 */
export function listingConnection<Node>(
  edges: { cursor: string; node: Node }[],
  page: { hasNextPage: boolean; endCursor: string | null },
  after: string | null | undefined,
) {
  return {
    edges,
    pageInfo: {
      hasNextPage: page.hasNextPage,
      hasPreviousPage: after != null,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: page.endCursor,
    },
  };
}

/** What a listing's description says of its pages. */
export const shortPagesDescription =
  'A page may hold fewer than `first` items (none, even) when a filter drops most of what was read (expired rows count as dropped): keep paging with `after: pageInfo.endCursor` while `hasNextPage`.';
