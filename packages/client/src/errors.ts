/**
 * RunplaneError: what the client throws for failures (never for a refusal, which is a result).
 * The server's codes are listed here again, not imported (the client depends on nothing of the
 * server); test/client/error-codes.unit.test.ts fails if the two lists drift apart.
 */

/** Every `extensions.code` the server answers with (src/schema/error-codes.ts). */
export const serverCodes = [
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'NOT_FOUND',
  'COST_LIMIT',
  'RESPONSE_TOO_LARGE',
  'LIMIT_EXCEEDED',
  'RATE_LIMITED',
  'THROTTLED',
  'CONFLICT',
  'UNAVAILABLE',
  'CONTENTION',
  'PAYLOAD_TOO_LARGE',
  'LENGTH_REQUIRED',
] as const;

/** The server's codes worth retrying (it marks them `extensions.retryable: true`). */
export const serverRetryableCodes = ['THROTTLED', 'CONFLICT', 'UNAVAILABLE', 'CONTENTION'] as const;

/** Codes the client gives to what the server never answered, or answered outside GraphQL. */
export const clientCodes = {
  /** The server could not be reached, or the connection broke (retryable). */
  network: 'NETWORK_ERROR',
  /** No answer within the request timeout (retryable: the idempotency key makes it safe). */
  timeout: 'TIMEOUT',
  /** The server is stopping and asked its clients to come back (WebSocket 1012; retryable). */
  restarting: 'SERVER_RESTARTING',
  /** An answer that is not GraphQL (a proxy's error page, say); retryable for 502, 503 and 504. */
  badResponse: 'BAD_RESPONSE',
  /** An error the server masked ("Unexpected error."). */
  internal: 'INTERNAL_SERVER_ERROR',
  /** withLease: another owner kept the unit for longer than `waitMs` (retryable later). */
  leaseHeld: 'LEASE_HELD',
  /** withLease: the lease was lost, or could not be renewed before it expired. */
  leaseLost: 'LEASE_LOST',
  /** withRun: another worker kept the run for longer than `waitMs` (retryable later). */
  runHeld: 'RUN_HELD',
  /** withRun: the claim was lost (taken over, run out, or could not be renewed before it expired). */
  claimLost: 'CLAIM_LOST',
  /** withRun: the run was cancelled while the function ran. */
  runCancelled: 'RUN_CANCELLED',
  /** An output writer: the stream holds other text where it wrote, or is final. */
  outputConflict: 'OUTPUT_CONFLICT',
} as const;

export type ServerCode = (typeof serverCodes)[number];
export type ClientCode = (typeof clientCodes)[keyof typeof clientCodes];
export type ErrorCode = ServerCode | ClientCode;

const retryable = new Set<string>([
  ...serverRetryableCodes,
  clientCodes.network,
  clientCodes.timeout,
  clientCodes.restarting,
  clientCodes.leaseHeld,
  clientCodes.runHeld,
]);

/** Whether a failure with this code may succeed if tried again later. */
export const isRetryableCode = (code: string) => retryable.has(code);

export class RunplaneError extends Error {
  override readonly name = 'RunplaneError';
  /** Trying again later may succeed (the client already did, up to its retry policy). */
  readonly retryable: boolean;
  /** The HTTP status, when the failure came with one. */
  readonly status: number | undefined;
  /** The server's `extensions` (e.g. `retryAfterMs`, `runId`), or withLease's holder. */
  readonly details: Record<string, unknown>;

  constructor(
    readonly code: ErrorCode | (string & {}),
    message: string,
    options: {
      retryable?: boolean;
      status?: number;
      details?: Record<string, unknown>;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.retryable = options.retryable ?? isRetryableCode(code);
    this.status = options.status;
    this.details = options.details ?? {};
  }
}

export interface GraphQLErrorLike {
  message: string;
  extensions?: { code?: unknown; retryable?: unknown; [key: string]: unknown };
}

/** The first error of a GraphQL response, as a RunplaneError (retryable only if every error is). */
export function fromGraphQLErrors(errors: readonly GraphQLErrorLike[], status?: number) {
  const first = errors[0] ?? { message: 'The server answered with an error and no message' };
  const codeOf = (e: GraphQLErrorLike) => (typeof e.extensions?.code === 'string' ? e.extensions.code : clientCodes.internal);
  const message = errors.map((e) => e.message).join('; ');
  const allRetryable = errors.length > 0 && errors.every((e) => isRetryableCode(codeOf(e)) || e.extensions?.retryable === true);
  return new RunplaneError(codeOf(first), message, { retryable: allRetryable, status, details: { ...first.extensions } });
}

/** WebSocket close codes (graphql-ws and the server's own) as the errors they mean. */
export function fromCloseCode(code: number, reason: string) {
  const said = reason ? `: ${reason}` : '';
  if (code === 1012) return new RunplaneError(clientCodes.restarting, 'the server is restarting');
  if (code === 4403) return new RunplaneError('UNAUTHENTICATED', `the server refused the API key (4403${said})`);
  if (code === 4429) return new RunplaneError('LIMIT_EXCEEDED', `the server refused the connection (4429${said})`);
  if (code === 1009) return new RunplaneError('PAYLOAD_TOO_LARGE', `a message was too large (1009${said})`);
  if ([4400, 4401, 4406, 4409].includes(code)) return new RunplaneError('BAD_REQUEST', `the server closed the connection (${code}${said})`);
  if (code === 4408) return new RunplaneError(clientCodes.timeout, `the connection was not set up in time (4408${said})`);
  return new RunplaneError(clientCodes.network, `the connection was closed (${code}${said})`);
}

/** A fetch or socket failure in words: the cause's code when Node gives one, never "[object Object]". */
export function fromNetworkFailure(err: unknown, url: string) {
  const e = err as { code?: unknown; cause?: { code?: unknown }; error?: { code?: unknown }; message?: unknown } | undefined;
  const code = [e?.cause?.code, e?.error?.code, e?.code].find((c) => typeof c === 'string');
  return new RunplaneError(clientCodes.network, `server not reachable at ${url}${code ? ` (${code})` : ''}`, { cause: err });
}
