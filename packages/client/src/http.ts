/**
 * Queries and mutations over HTTP (a POST of JSON), with retries. One attempt either returns
 * the operation's data or throws a RunplaneError saying whether trying again may help.
 */

import { clientCodes, fromGraphQLErrors, fromNetworkFailure, type GraphQLErrorLike, RunplaneError } from './errors.ts';
import { type Document, documentText, type ResultOf, type ValidDocument, type VariablesOf } from './graphql.ts';
import type { Notice } from './notices.ts';
import { Attempts, type RetryPolicy, sleep } from './retry.ts';
import { anySignal } from './signals.ts';

export interface HttpConnection {
  url: string;
  headers: Record<string, string>;
  fetch: typeof fetch;
  requestTimeoutMs: number;
}

export interface SendOptions {
  signal?: AbortSignal;
  /** How failures are retried; `false`: sent once. */
  retry: RetryPolicy | false;
  onNotice: (notice: Notice) => void;
}

/** Sends `document` until it is answered, a failure is not worth retrying, or the policy runs out. */
export async function send<D extends Document>(
  http: HttpConnection,
  document: D & ValidDocument<D>,
  variables: VariablesOf<D>,
  { signal, retry, onNotice }: SendOptions,
): Promise<ResultOf<D>> {
  const nonFinite = nonFiniteAt(variables, '');
  if (nonFinite !== undefined) {
    // JSON has no NaN or Infinity: JSON.stringify would send null in its place, and store that.
    throw new RunplaneError('BAD_USER_INPUT', `${nonFinite} is not a finite number: JSON cannot carry NaN or Infinity (nothing was sent)`, {
      retryable: false,
      details: { field: nonFinite },
    });
  }
  const attempts = new Attempts(retry || { maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0, deadlineMs: 0 });
  for (;;) {
    try {
      return (await attemptOnce(http, document, variables, signal)) as ResultOf<D>;
    } catch (err) {
      if (!(err instanceof RunplaneError)) throw err;
      const delayMs = attempts.next(err);
      if (delayMs === undefined) throw err;
      onNotice({ kind: 'retry', operation: operationName(document), attempt: attempts.count, delayMs, error: err });
      await sleep(delayMs, signal);
    }
  }
}

async function attemptOnce(http: HttpConnection, document: Document, variables: unknown, signal?: AbortSignal) {
  const timeout = AbortSignal.timeout(http.requestTimeoutMs);
  let response: Response;
  let text: string;
  try {
    response = await http.fetch(http.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...http.headers },
      body: JSON.stringify({ query: documentText(document), variables }),
      signal: signal ? anySignal([signal, timeout]) : timeout,
    });
    text = await response.text();
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) throw new RunplaneError(clientCodes.timeout, `no answer from ${http.url} within ${http.requestTimeoutMs} ms`);
    throw fromNetworkFailure(err, http.url);
  }
  let body: { data?: Record<string, unknown> | null; errors?: GraphQLErrorLike[] } | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (body?.errors?.length) throw fromGraphQLErrors(body.errors, response.status);
  if (!response.ok || !body?.data) {
    const retryable = [502, 503, 504].includes(response.status);
    throw new RunplaneError(clientCodes.badResponse, `${http.url} answered ${response.status} without GraphQL data`, {
      retryable,
      status: response.status,
    });
  }
  return body.data;
}

/** The document's operation name, for notices. */
export function operationName(document: Document) {
  for (const definition of document.definitions) {
    if (definition.kind === 'OperationDefinition') return definition.name?.value ?? definition.operation;
  }
  return 'operation';
}

/** The path of the first NaN or Infinity within `value` (`input.payload.scores[2]`), if any. */
function nonFiniteAt(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path || '(the variables)';
  if (value === null || typeof value !== 'object' || depth > 100) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nonFiniteAt(value[i], `${path}[${i}]`, depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const found = nonFiniteAt(item, path ? `${path}.${key}` : key, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}
