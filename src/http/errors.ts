/**
 * What clients see of errors. Refusals and bad input keep their message; DynamoDB being
 * slow, throttling or unreachable becomes a clear retryable error; anything else is
 * masked ("Unexpected error.") and logged in full, never sent with stacks or internals.
 */
import { GraphQLError, Kind } from 'graphql';
import { maskError as yogaMaskError } from 'graphql-yoga';
import {
  ChangesLost,
  Contention,
  FellBehind,
  InvalidInput,
  OutputBacklog,
  OutputStreamLimit,
  OutputTooLong,
  ReadsWaiting,
  RunNotFound,
  TooManyReads,
} from '../domain/errors.ts';
import { codes } from '../schema/error-codes.ts';

/** The kinds of DynamoDB failure that retrying later may cure (decided by the table layer; the composition root hands it in). */
export type AvailabilityOf = (err: unknown) => 'throttled' | 'conflict' | 'unreachable' | undefined;

const retryable = {
  throttled: [codes.throttled, 'DynamoDB is throttling requests; retry in a moment'],
  conflict: [codes.conflict, 'The write kept colliding with other transactions; retry in a moment'],
  unreachable: [codes.unavailable, 'DynamoDB could not be reached or failed; retry in a moment'],
} as const;

/** What a client is shown of an error (yoga's maskError signature). */
export type Mask = (error: unknown, message: string) => Error;

export function maskError(logError: (error: unknown) => void, availabilityOf: AvailabilityOf): Mask {
  return (error: unknown, message: string) => {
    const original = error instanceof GraphQLError ? error.originalError : error;
    if (original instanceof Contention) {
      return new GraphQLError(original.message, { extensions: { code: codes.contention, retryable: true } });
    }
    if (original instanceof FellBehind)
      return new GraphQLError(original.message, { extensions: { code: codes.limitExceeded, limit: original.limit } });
    if (original instanceof OutputTooLong)
      return new GraphQLError(original.message, { extensions: { code: codes.limitExceeded, limit: original.limit } });
    if (original instanceof OutputStreamLimit)
      return new GraphQLError(original.message, {
        extensions: { code: codes.limitExceeded, limit: original.limit, variable: 'RUNPLANE_MAX_OUTPUT_STREAMS' },
      });
    if (original instanceof OutputBacklog)
      return new GraphQLError(original.message, { extensions: { code: codes.unavailable, retryable: true } });
    if (original instanceof ReadsWaiting)
      return new GraphQLError(original.message, { extensions: { code: codes.unavailable, retryable: true, http: { status: 503 } } });
    if (original instanceof TooManyReads)
      return new GraphQLError(original.message, { extensions: { code: codes.limitExceeded, limit: original.limit } });
    if (original instanceof ChangesLost)
      return new GraphQLError(original.message, { extensions: { code: codes.unavailable, retryable: true } });
    if (original instanceof InvalidInput) return new GraphQLError(original.message, { extensions: { code: codes.badInput } });
    if (isVariableRefusal(error)) return badVariable(error);
    // Where a refusal cannot be a result (a subscription's), it is this error, saying the same.
    if (original instanceof RunNotFound)
      return new GraphQLError(original.message, { extensions: { code: codes.notFound, runId: original.runId } });
    const kind = availabilityOf(original);
    if (kind) {
      logError(original);
      const [code, text] = retryable[kind];
      return new GraphQLError(text, { extensions: { code, retryable: true, http: { status: 503 } } });
    }
    // Errors made on purpose for the client (bad input, not found) are not news for the log.
    if (!(original instanceof GraphQLError) && !(error instanceof GraphQLError && !original)) logError(original ?? error);
    return yogaMaskError(error, message, false);
  };
}

/**
 * What graphql-js answers, once the document is valid, when the variables sent do not fit it:
 * (1) a value refused at the variable's definition (of the wrong type, missing, out of range),
 * the only error it makes there (validation's own carry yoga's GRAPHQL_VALIDATION_FAILED
 * already); (2) the end of a list of those; (3) a variable's value refused where an argument
 * uses it (`null` through a nullable variable into a non-null argument), a field error.
 */
const TOO_MANY_VARIABLE_ERRORS = 'Too many errors processing variables, error limit reached. Execution aborted.';
const ARGUMENT_REFUSAL =
  /^Argument "[^"]+" (?:of required type .+ was not provided|of non-null type .+ must not be null|has invalid value )/;

/** graphql-js's own error, or its own error located at a field: nothing thrown by the schema's code. */
const isGraphqlJsOwn = ({ originalError: cause, message }: GraphQLError) =>
  !cause || (cause instanceof GraphQLError && !cause.originalError && cause.message === message);

const isVariableRefusal = (error: unknown): error is GraphQLError =>
  error instanceof GraphQLError &&
  error.extensions?.code === undefined &&
  (error.nodes?.[0]?.kind === Kind.VARIABLE_DEFINITION ||
    (isGraphqlJsOwn(error) && (error.message === TOO_MANY_VARIABLE_ERRORS || ARGUMENT_REFUSAL.test(error.message))));

/** Bad input like any other: the same message, with BAD_USER_INPUT (yoga's HTTP status kept). */
const badVariable = (error: GraphQLError) => withExtensions(error, { ...error.extensions, code: codes.badInput });

/** The same error (message, place, cause) with other extensions. */
const withExtensions = (error: GraphQLError, extensions: GraphQLError['extensions']) =>
  new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions,
  });

/**
 * An error as a client sees it over a stream (a subscription frame, a WebSocket answer): without
 * the HTTP status yoga keeps in its extensions, which only an HTTP response's status carries.
 */
export function withoutHttpStatus(error: GraphQLError): GraphQLError {
  if (!error.extensions || !('http' in error.extensions)) return error;
  const { http: _, ...extensions } = error.extensions;
  return withExtensions(error, extensions);
}
