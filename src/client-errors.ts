/**
 * What clients see of errors. Refusals and bad input keep their message; DynamoDB being
 * slow, throttling or unreachable becomes a clear retryable error; anything else is
 * masked ("Unexpected error.") and logged in full, never sent with stacks or internals.
 */
import { GraphQLError } from 'graphql';
import { maskError as yogaMaskError } from 'graphql-yoga';
import { Contention, InvalidInput } from './domain/errors.ts';
import { isTransactionConflict } from './store/retry.ts';

const THROTTLED = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'LimitExceededException',
]);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ECONNABORTED']);

/** The client-facing form of a DynamoDB failure that retrying later may cure, or undefined. */
function availability(err: unknown): GraphQLError | undefined {
  const e = err as Error & { code?: string; $metadata?: { httpStatusCode?: number }; $retryable?: unknown };
  const retry = (code: string, message: string) =>
    new GraphQLError(message, { extensions: { code, retryable: true, http: { status: 503 } } });
  if (THROTTLED.has(e?.name)) return retry('THROTTLED', 'DynamoDB is throttling requests; retry in a moment');
  if (isTransactionConflict(err)) return retry('CONFLICT', 'The write kept colliding with other transactions; retry in a moment');
  if (
    UNREACHABLE.has(e?.code ?? '') ||
    e?.name === 'TimeoutError' ||
    e?.name === 'RequestTimeout' ||
    (e?.$metadata?.httpStatusCode ?? 0) >= 500
  ) {
    return retry('UNAVAILABLE', 'DynamoDB could not be reached or failed; retry in a moment');
  }
  return undefined;
}

export function maskError(logError: (error: unknown) => void) {
  return (error: unknown, message: string) => {
    const original = error instanceof GraphQLError ? error.originalError : error;
    if (original instanceof Contention) {
      return new GraphQLError(original.message, { extensions: { code: 'CONTENTION', retryable: true } });
    }
    if (original instanceof InvalidInput) return new GraphQLError(original.message, { extensions: { code: 'BAD_USER_INPUT' } });
    const unavailable = availability(original);
    if (unavailable) {
      logError(original);
      return unavailable;
    }
    // Errors made on purpose for the client (bad input, not found) are not news for the log.
    if (!(original instanceof GraphQLError) && !(error instanceof GraphQLError && !original)) logError(original ?? error);
    return yogaMaskError(error, message, false);
  };
}
