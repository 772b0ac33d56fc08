/** An error answered to the client in DynamoDB's JSON 1.0 error shape. */
export class EngineError extends Error {
  constructor(
    readonly statusCode: number,
    /** The full `__type`, e.g. `com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException`. */
    readonly type: string,
    message: string,
    /** Extra members of the error body (`Item`, `CancellationReasons`). */
    readonly fields: Record<string, unknown> = {},
    /** dynalite's SerializationException spells it `Message`; keep the wire shape it chose (null: no message at all). */
    readonly messageKey: 'message' | 'Message' | null = 'message',
  ) {
    super(message);
  }

  get code() {
    return this.type.slice(this.type.indexOf('#') + 1);
  }

  static fromBody(statusCode: number, body: { __type: string; message?: string; Message?: string }) {
    const { __type, message, Message, ...fields } = body;
    return new EngineError(statusCode, __type, message ?? Message ?? '', fields, Message !== undefined ? 'Message' : 'message');
  }

  toBody() {
    if (this.messageKey === null) return { __type: this.type, ...this.fields };
    return { __type: this.type, [this.messageKey]: this.message, ...this.fields };
  }
}

const dynamodb = 'com.amazonaws.dynamodb.v20120810#';

export const errors = {
  validation: (message: string) => new EngineError(400, 'com.amazon.coral.validate#ValidationException', message),
  serialization: (message: string) => new EngineError(400, 'com.amazon.coral.service#SerializationException', message, {}, 'Message'),
  /** What DynamoDB answers for a body that is not JSON, or no body: the type alone. */
  unreadableBody: () => new EngineError(400, 'com.amazon.coral.service#SerializationException', '', {}, null),
  unknownOperation: (message: string) => new EngineError(400, 'com.amazon.coral.service#UnknownOperationException', message),
  resourceNotFound: (message = 'Requested resource not found') => new EngineError(400, `${dynamodb}ResourceNotFoundException`, message),
  conditionalCheckFailed: (item?: Record<string, unknown>) =>
    new EngineError(400, `${dynamodb}ConditionalCheckFailedException`, 'The conditional request failed', item ? { Item: item } : {}),
  transactionCanceled: (reasons: { Code: string; Message?: string; Item?: unknown }[]) =>
    new EngineError(
      400,
      `${dynamodb}TransactionCanceledException`,
      `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
      { CancellationReasons: reasons },
    ),
  /** A single write or read meeting an item held by a transaction that does not let go in time. */
  transactionConflict: () => new EngineError(400, `${dynamodb}TransactionConflictException`, 'Transaction is ongoing for the item'),
  transactionInProgress: () =>
    new EngineError(400, `${dynamodb}TransactionInProgressException`, 'Request with the given ClientRequestToken is already in progress'),
  idempotentParameterMismatch: () =>
    new EngineError(
      400,
      `${dynamodb}IdempotentParameterMismatchException`,
      'The request uses the same client token as a previous, but non-identical request',
    ),
  expiredIterator: (message: string) => new EngineError(400, `${dynamodb}ExpiredIteratorException`, message),
  trimmedDataAccess: (message: string) => new EngineError(400, `${dynamodb}TrimmedDataAccessException`, message),
  internal: (message = 'Internal server error') => new EngineError(500, `${dynamodb}InternalServerError`, message),
};

/** Whether `err` is a ConditionalCheckFailedException (ours or dynalite's). */
export function isConditionalFailure(err: unknown): err is EngineError {
  return err instanceof EngineError && err.code === 'ConditionalCheckFailedException';
}
