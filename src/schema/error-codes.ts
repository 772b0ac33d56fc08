import { GraphQLError } from 'graphql';

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
  /** DynamoDB throttled the request (retryable). */
  throttled: 'THROTTLED',
  /** The write kept meeting other transactions (retryable). */
  conflict: 'CONFLICT',
  /** DynamoDB could not be reached or failed (retryable). */
  unavailable: 'UNAVAILABLE',
  /** The row kept changing under a request that reads before it writes (retryable). */
  contention: 'CONTENTION',
  payloadTooLarge: 'PAYLOAD_TOO_LARGE',
  lengthRequired: 'LENGTH_REQUIRED',
} as const;

/** The codes of errors a client should retry (they carry `extensions.retryable: true`). */
export const retryableCodes: ReadonlySet<string> = new Set([codes.throttled, codes.conflict, codes.unavailable, codes.contention]);

/** Bad input, naming the field: `Invalid input: <field>: <what is wrong>`. */
export const badInput = (message: string) => new GraphQLError(`Invalid input: ${message}`, { extensions: { code: codes.badInput } });
