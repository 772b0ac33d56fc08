/** The client keeps its own list of the server's error codes (it imports nothing of the server): here the two must agree. */
import { expect, test } from 'vitest';
import { isRetryableCode, serverCodes, serverRetryableCodes } from '../../packages/client/src/errors.ts';
import { codes, retryableCodes } from '../../src/schema/error-codes.ts';

test("the client's list of codes is the server's", () => {
  expect([...serverCodes].sort()).toEqual(Object.values(codes).sort());
});

test('the client retries exactly what the server calls retryable, and never what it does not', () => {
  expect([...serverRetryableCodes].sort()).toEqual([...retryableCodes].sort());
  for (const code of Object.values(codes)) expect(isRetryableCode(code)).toBe(retryableCodes.has(code));
});
