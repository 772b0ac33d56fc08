/** How much one request may read for its response: refused once reached, before more is read. */
import { GraphQLError } from 'graphql';
import type { ResponseLimit } from '../store/index.ts';
import { codes } from './error-codes.ts';

/** A class, not closures: a subscription forks one for every event it delivers. */
class ResponseSizeLimit implements ResponseLimit {
  private spent = 0;

  constructor(private readonly maxBytes: number) {}

  spend(bytes: number) {
    this.spent += bytes;
    if (this.spent > this.maxBytes) {
      throw new GraphQLError(
        `The response would be larger than ${this.maxBytes} bytes (RUNPLANE_MAX_RESPONSE_BYTES): ask for smaller pages (first/last) or fewer fields`,
        { extensions: { code: codes.responseTooLarge, maxBytes: this.maxBytes } },
      );
    }
  }

  fork(): ResponseLimit {
    return new ResponseSizeLimit(this.maxBytes);
  }
}

export const responseLimit = (maxBytes: number): ResponseLimit => new ResponseSizeLimit(maxBytes);
