/** The `extensions.code` of every top-level GraphQL error this API answers with. */
export const codes = {
  badInput: 'BAD_USER_INPUT',
  badRequest: 'BAD_REQUEST',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  notFound: 'NOT_FOUND',
  /** The operation would cost more than RUNPLANE_MAX_QUERY_COST. */
  costLimit: 'COST_LIMIT',
  /** The response would be larger than RUNPLANE_MAX_RESPONSE_BYTES. */
  responseTooLarge: 'RESPONSE_TOO_LARGE',
  /** A cap on what one client may hold open (subscriptions, connections). */
  limitExceeded: 'LIMIT_EXCEEDED',
  /** Too many subscription setups too fast: retry after `extensions.retryAfterMs`. */
  rateLimited: 'RATE_LIMITED',
} as const;
