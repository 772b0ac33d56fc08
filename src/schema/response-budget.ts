/** How much one request may read for its response: refused once reached, before more is read. */
import { GraphQLError } from 'graphql';
import type { ReadBudget } from '../store/index.ts';
import { codes } from './error-codes.ts';

export function responseBudget(maxBytes: number): ReadBudget {
  let spent = 0;
  return {
    spend(bytes) {
      spent += bytes;
      if (spent > maxBytes) {
        throw new GraphQLError(
          `The response would be larger than ${maxBytes} bytes (RUNPLANE_MAX_RESPONSE_BYTES): ask for smaller pages (first/last) or fewer fields`,
          { extensions: { code: codes.responseTooLarge, maxBytes } },
        );
      }
    },
    fork: () => responseBudget(maxBytes),
  };
}
