/**
 * What DynamoDB answers about a request's signature before it checks its value: a request
 * over HTTP must carry one (an `Authorization` header or the `X-Amz-*` query parameters,
 * not both), and whole. Its value is checked by sigv4.ts when the engine has credentials;
 * without them any credentials are accepted.
 * Wording as DynamoDB's (dynalite's test suite was written against it).
 */
import { EngineError } from './errors.ts';

const service = 'com.amazon.coral.service#';
const headerParams = ['Credential', 'Signature', 'SignedHeaders'];
const queryParams = ['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Signature', 'X-Amz-SignedHeaders', 'X-Amz-Date'];

export interface SignedParts {
  authorization: string | undefined;
  /** The request's query string (after `?`), if it has one. */
  query: string | undefined;
  /** Whether an `X-Amz-Date` or `Date` header is present. */
  hasDate: boolean;
}

/** The refusal DynamoDB gives a request whose signature is missing or incomplete, if any. */
export function signatureProblem({ authorization, query, hasDate }: SignedParts): EngineError | undefined {
  const params = query ? new URLSearchParams(query) : undefined;
  const byQuery = params?.has('X-Amz-Algorithm') ?? false;
  if (authorization && byQuery) {
    return new EngineError(
      400,
      `${service}InvalidSignatureException`,
      "Found both 'X-Amz-Algorithm' as a query-string param and 'Authorization' as HTTP header.",
    );
  }
  if ((!authorization && !byQuery) || (authorization && authorization.trim().slice(0, 5) !== 'AWS4-')) {
    return new EngineError(400, `${service}MissingAuthenticationTokenException`, 'Request is missing Authentication Token');
  }
  let message = '';
  if (authorization) {
    const given = new Map<string, string | undefined>();
    for (const part of authorization.split(/,| /).slice(1).filter(Boolean)) {
      const [name = '', value] = part.trim().split('=');
      given.set(name, value);
    }
    for (const param of headerParams) if (!given.get(param)) message += `Authorization header requires '${param}' parameter. `;
    if (!hasDate) message += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. ";
    if (message) message += `Authorization=${authorization}`;
  } else {
    for (const param of queryParams) if (!params?.get(param)) message += `AWS query-string parameters must include '${param}'. `;
    if (message) message += 'Re-examine the query-string parameters.';
  }
  return message ? new EngineError(400, `${service}IncompleteSignatureException`, message) : undefined;
}
