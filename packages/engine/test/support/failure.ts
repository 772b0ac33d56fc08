/** A request that must fail, and what it failed with: an SDK error with DynamoDB's fields on it. */
export type Failure = Error & {
  $metadata?: { httpStatusCode?: number; attempts?: number };
  CancellationReasons?: { Code: string; Message?: string; Item?: Record<string, unknown> }[];
  ThrottlingReasons?: unknown;
  throttlingReasons?: unknown;
  [field: string]: unknown;
};

/** The error `promise` rejects with; fails the test when it resolves instead. */
export async function failure(promise: Promise<unknown>): Promise<Failure> {
  try {
    await promise;
  } catch (err) {
    return err as Failure;
  }
  throw new Error('expected the request to fail');
}
