/**
 * A field's `extensions` saying its resolver only reads its parent, synchronously, and never
 * its args, context or info: a subscription's events may then be resolved without graphql-js's
 * execute (http/subscriptions/plain-execution.ts). Fields without a resolver need no mark.
 */
export const plainRead = { runplanePlainRead: true } as const;

export const isPlainRead = (extensions: Readonly<Record<string, unknown>> | null | undefined) => extensions?.runplanePlainRead === true;
