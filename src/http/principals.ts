/**
 * Who asks, and on which connection: settled once per HTTP request (before yoga sees it) and
 * once per WebSocket (at connection_init), then handed to every operation's context.
 */
import type { IncomingMessage } from 'node:http';
import { GraphQLError } from 'graphql';
import type { Principal } from '../domain/principal.ts';
import { SendBuffer } from '../lib/send-buffer.ts';
import type { Connection } from '../schema/context.ts';
import { codes } from '../schema/error-codes.ts';
import { bearer } from './api-keys.ts';

/** A request's principal and connection, as yoga's context function receives them. */
export interface Served {
  principal: Principal;
  connection: Connection;
}

/** Node request -> who it is from (set by the request handler, read by yoga's context). */
export const served = new WeakMap<IncomingMessage, Served>();

export const unauthenticated = (message: string) =>
  new GraphQLError(message, { extensions: { code: codes.unauthenticated, http: { status: 401 } } });

/** What a missing or wrong key is told. */
export const refusalOf = (key: string | undefined) =>
  unauthenticated(key ? 'This API key is not valid (unknown or revoked)' : 'An API key is required: Authorization: Bearer <key>');

/** The key of a WebSocket connection: connectionParams.authorization ("Bearer <key>") or .apiKey. */
export function socketKey(params: Readonly<Record<string, unknown>> | undefined) {
  return bearer(params?.authorization ?? params?.Authorization) ?? (typeof params?.apiKey === 'string' ? params.apiKey : undefined);
}

/** A new connection's state: its send buffer adds what it holds to the process's totals. */
export const connectionFactory =
  (sendBufferBytes: number, totals?: { held: number }) =>
  (transport: Connection['transport'], address: string): Connection => ({
    transport,
    address,
    sendBuffer: new SendBuffer(sendBufferBytes, totals),
  });

export type NewConnection = ReturnType<typeof connectionFactory>;
