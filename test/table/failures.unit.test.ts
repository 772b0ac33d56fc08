/** Which DynamoDB failures are throttles, and which of those prove nothing was applied. */
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { describe, expect, test } from 'vitest';
import { availabilityOf, isThrottle, isUnappliedThrottle } from '../../src/table/failures.ts';

const named = (name: string, attempts?: number) => Object.assign(new Error(name), { name, $metadata: { attempts } });
const cancelled = (...codes: string[]) =>
  new TransactionCanceledException({
    message: 'cancelled',
    $metadata: { attempts: 1 },
    CancellationReasons: codes.map((Code) => ({ Code })),
  });

describe('throttles', () => {
  test.each([
    ['ThrottlingException', named('ThrottlingException'), true],
    ['ProvisionedThroughputExceededException', named('ProvisionedThroughputExceededException'), true],
    ['a transaction cancelled for throughput (on demand)', cancelled('None', 'ThrottlingError'), true],
    ['a transaction cancelled for throughput (provisioned)', cancelled('ProvisionedThroughputExceeded'), true],
    ['a transaction cancelled by a condition as well', cancelled('ConditionalCheckFailed', 'ThrottlingError'), false],
    ['a transaction conflict', cancelled('TransactionConflict'), false],
    ['a failed condition', named('ConditionalCheckFailedException'), false],
  ])('%s', (_what, err, throttle) => {
    expect(isThrottle(err)).toBe(throttle);
    expect(availabilityOf(err) === 'throttled').toBe(throttle);
  });

  test("a throttle proves nothing was applied only on the request's one attempt (an earlier one may have landed unanswered)", () => {
    expect(isUnappliedThrottle(named('ThrottlingException', 1))).toBe(true);
    expect(isUnappliedThrottle(cancelled('ThrottlingError'))).toBe(true);
    expect(isUnappliedThrottle(named('ThrottlingException', 3))).toBe(false);
    expect(isUnappliedThrottle(named('InternalServerError', 1))).toBe(false);
  });
});
