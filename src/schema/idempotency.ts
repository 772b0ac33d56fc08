import type { IdempotencyKey } from '../store/index.ts';

/** The idempotency key of a mutation's input, with the request it stands for (the input without the key). */
export function idempotencyOf<T extends { idempotencyKey?: string | null }>(
  tenant: string,
  operation: string,
  input: T,
): IdempotencyKey | undefined {
  const { idempotencyKey, ...fields } = input;
  if (!idempotencyKey) return undefined;
  // A field sent as null and one left out mean the same to every mutation: the same request.
  const request = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null));
  return { tenant, key: idempotencyKey, operation, request };
}

export const idempotencyKeyDescription =
  'Makes a retry safe: the first request with this key is applied, later ones with the same key and the same input get its result back without applying anything; the same key with another input is refused (IdempotencyConflict). Keys are kept for RUNPLANE_IDEMPOTENCY_TTL_HOURS.';
