/**
 * The harness's GraphQL client: one request with a deadline, its failure sorted into
 * "may retry" (the server could not answer, or said so) or not.
 */
import { retryableCodes } from '../src/schema/error-codes.ts';
import type { History } from './history.ts';

export interface Answer {
  data?: Record<string, Record<string, unknown> & { __typename?: string }>;
  /** Why no usable answer came (the request may or may not have been applied). */
  failure?: string;
  /** Whether asking again may help (no answer, or the server said so). */
  retryable?: boolean;
}

export function graphql(url: () => string, history: History, timeoutMs = 5_000) {
  return async (query: string, variables: Record<string, unknown>): Promise<Answer> => {
    history.requests++;
    let response: Response;
    try {
      response = await fetch(url(), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      return {
        retryable: true,
        failure: `no answer: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`,
      };
    }
    let body: { data?: Answer['data']; errors?: { message: string; extensions?: { code?: string } }[] };
    try {
      body = (await response.json()) as typeof body;
    } catch {
      return { retryable: true, failure: `HTTP ${response.status} without a GraphQL answer` };
    }
    const error = body.errors?.[0];
    if (error) {
      const code = error.extensions?.code ?? '';
      const retryable = retryableCodes.has(code);
      if (!retryable) history.unexpected.push(`${code || 'no code'}: ${error.message}`);
      return { retryable, failure: `${code}: ${error.message}` };
    }
    return { data: body.data };
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
