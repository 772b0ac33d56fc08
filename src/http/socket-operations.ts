/**
 * One operation asked for on a WebSocket, admitted or refused before it runs: the socket has
 * room and a session, the id and name are not too long, the setup rate (before parsing), the
 * key again, parse, validation and cost as over HTTP, and a subscription's place.
 */
import { type ExecutionArgs, type ExecutionResult, GraphQLError, getOperationAST } from 'graphql';
import type { Context as SocketContext } from 'graphql-ws';
import type { Context } from '../schema/context.ts';
import { codes } from '../schema/error-codes.ts';
import type { Admission } from './admission.ts';
import type { ApiKeys } from './api-keys.ts';
import { type CostRules, checkCost } from './cost.ts';
import { refusalOf, type Served, socketKey, unauthenticated } from './principals.ts';
import type { Extra, SocketSession, SocketSessions } from './socket-sessions.ts';
import type { YogaServer } from './yoga.ts';

/** Longest subscription id (graphql-ws echoes it in every frame) and operation name accepted. */
const MAX_ID_LENGTH = 128;
const MAX_OPERATION_NAME_LENGTH = 256;
/** A document that may hold a subscription (every subscription operation is spelled with this word). */
const SUBSCRIPTION_KEYWORD = /\bsubscription\b/;

/**
 * The operation's envelope, as yoga's graphql-ws recipe hands it on: graphql-ws's execute and
 * subscribe run the envelope's, so every envelop plugin sees WebSocket operations as it sees HTTP ones.
 */
export interface EnvelopedRoot {
  execute: (args: ExecutionArgs) => Promise<ExecutionResult | AsyncIterable<ExecutionResult>>;
  subscribe: (args: ExecutionArgs) => Promise<ExecutionResult | AsyncIterable<ExecutionResult>>;
  session: SocketSession;
}

export interface OperationDeps {
  yoga: YogaServer;
  apiKeys: ApiKeys;
  admission: Admission;
  cost: CostRules;
}

const badRequest = (message: string) => new GraphQLError(message, { extensions: { code: codes.badRequest } });

export function operationAdmission({ yoga, apiKeys, admission, cost }: OperationDeps, sessions: SocketSessions) {
  /** An operation admitted (its execution arguments) or refused (its errors). */
  return async function admit(
    ctx: SocketContext<Record<string, unknown>, Extra>,
    id: string,
    payload: { query: string; operationName?: string | null; variables?: Record<string, unknown> | null },
  ): Promise<ExecutionArgs | readonly GraphQLError[]> {
    const socket = ctx.extra.socket;
    const waitingOn = sessions.get(socket);
    if (waitingOn && !(await sessions.untilRoom(socket, ctx.extra.request.socket, waitingOn)))
      return [badRequest('This connection left what it was sent unread')];
    if (id.length > MAX_ID_LENGTH) {
      const refusal = `Subscription ids are at most ${MAX_ID_LENGTH} characters`;
      socket.close(4400, refusal);
      return [badRequest(refusal)];
    }
    if ((payload.operationName?.length ?? 0) > MAX_OPERATION_NAME_LENGTH) {
      return [badRequest(`Operation names are at most ${MAX_OPERATION_NAME_LENGTH} characters`)];
    }
    const session = sessions.get(socket);
    if (!session) return [unauthenticated('Send connection_init with an API key first')];
    // The setup rate is taken before parsing: a flood of subscribes costs a token check each.
    if (SUBSCRIPTION_KEYWORD.test(payload.query)) {
      const tooFast = admission.setup({ slot: session.slot });
      if (tooFast) return [tooFast];
    }
    // The key is checked again for each operation: a key revoked since connecting stops here.
    const principal = apiKeys.authenticate(socketKey(ctx.connectionParams));
    if (!principal) return [refusalOf(socketKey(ctx.connectionParams))];
    const enveloped = yoga.getEnveloped({
      ...ctx,
      principal,
      req: ctx.extra.request,
      socket,
      params: payload,
      connectionParams: ctx.connectionParams ?? {},
    });
    // Limits throw from parse and validate (as over HTTP): answer them as this operation's errors.
    let document: ReturnType<typeof enveloped.parse>;
    try {
      document = enveloped.parse(payload.query);
      const errors = enveloped.validate(enveloped.schema, document);
      if (errors.length > 0) return errors;
      checkCost(enveloped.schema, document, payload.operationName, payload.variables, cost);
    } catch (err) {
      if (err instanceof GraphQLError) return [err];
      throw err;
    }
    if (getOperationAST(document, payload.operationName)?.operation === 'subscription') {
      const admitted = admission.subscribe(principal.tenant, session.slot);
      if (admitted instanceof GraphQLError) return [admitted];
      session.places.set(id, admitted);
    }
    let contextValue: Context;
    try {
      contextValue = (await enveloped.contextFactory({ principal, connection: session.connection } satisfies Served)) as Context;
    } catch (err) {
      sessions.giveBack(socket, id);
      if (err instanceof GraphQLError) return [err];
      throw err;
    }
    const rootValue: EnvelopedRoot = { execute: enveloped.execute, subscribe: enveloped.subscribe, session };
    return {
      schema: enveloped.schema,
      operationName: payload.operationName,
      document,
      variableValues: payload.variables,
      contextValue,
      rootValue,
    };
  };
}
