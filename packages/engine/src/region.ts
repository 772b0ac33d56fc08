/**
 * The region a request is made in. The engine keeps one namespace of tables whatever the
 * region (as DynamoDB Local does with a shared database), but answers in the client's
 * region: ARNs and stream records' `awsRegion` say the region the client signed for.
 * Everything is stored with the engine's own (canonical) region and translated on the way
 * in and out.
 */

/** `Credential=<key id>/<date>/<region>/<service>/aws4_request` in a SigV4 Authorization header. */
const CREDENTIAL_SCOPE = /Credential=[^/,\s]+\/\d{8}\/([a-z0-9-]{1,64})\/[^/,\s]+\/aws4_request/;

/** The region of a SigV4-signed request, or undefined when it is not signed that way. */
export function signingRegion(authorization: string | string[] | undefined) {
  const header = Array.isArray(authorization) ? authorization[0] : authorization;
  return header ? CREDENTIAL_SCOPE.exec(header)?.[1] : undefined;
}

/** `arn:aws:dynamodb:<region>:<account>:<resource>` with its region replaced; anything else as it is. */
export function inRegion(arn: string, region: string) {
  const parts = arn.split(':');
  if (parts.length < 6 || parts[0] !== 'arn' || parts[2] !== 'dynamodb' || parts[3] === region) return arn;
  parts[3] = region;
  return parts.join(':');
}

/** Translating a table description's ARNs (table, indexes, latest stream) for a client. */
export function tableInRegion<T extends Record<string, unknown>>(table: T, region: string): T {
  const localized: Record<string, unknown> = { ...table };
  for (const field of ['TableArn', 'LatestStreamArn'] as const) {
    const arn = table[field];
    if (typeof arn === 'string') localized[field] = inRegion(arn, region);
  }
  for (const field of ['GlobalSecondaryIndexes', 'LocalSecondaryIndexes'] as const) {
    const indexes = table[field];
    if (!Array.isArray(indexes)) continue;
    localized[field] = indexes.map((index: Record<string, unknown>) =>
      typeof index.IndexArn === 'string' ? { ...index, IndexArn: inRegion(index.IndexArn, region) } : index,
    );
  }
  return localized as T;
}
