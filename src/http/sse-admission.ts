/**
 * Subscriptions over SSE (one per request): admitted per tenant and per client address,
 * ended when their key is revoked (the client gets UNAUTHENTICATED), and their place given
 * back however they end. Over WebSocket the socket does this (http/websocket.ts).
 */
import type { ExecutionArgs } from 'graphql';
import { GraphQLError } from 'graphql';
import type { Context } from '../schema/context.ts';
import type { Admission, Release } from './admission.ts';
import type { ApiKeys } from './api-keys.ts';
import { unauthenticated } from './principals.ts';
import type { Sessions } from './sessions.ts';

/**
 * Passes `source` on until it ends, its consumer stops, or `keyId` is revoked; then gives its
 * place back. Hand-written, not a Repeater: a client may go away before the first pull, and a
 * Repeater that has not started would not hear of it (the place would never be given back).
 */
function revocable<T>(
  source: AsyncIterableIterator<T>,
  keyId: string,
  sessions: Sessions,
  release: Release,
  stillValid: () => boolean,
): AsyncIterableIterator<T> {
  let revoke: ((err: unknown) => void) | undefined;
  const revoked = new Promise<never>((_, reject) => {
    revoke = reject;
  });
  revoked.catch(() => undefined);
  const end = () => {
    revoke?.(unauthenticated('This API key was revoked'));
    void source.return?.();
  };
  const forget = sessions.track(keyId, end);
  // Revoked between the operation's start and this tracking: no revocation would reach it.
  if (!stillValid()) end();
  let ended = false;
  const finish = () => {
    if (ended) return;
    ended = true;
    forget();
    release();
  };
  return {
    async next() {
      // Ended (revoked, failed or returned): done for good. yoga turns a failure into an error
      // result and asks again, and a failure repeated on every ask would never end the stream.
      if (ended) return { value: undefined, done: true };
      try {
        const item = await Promise.race([source.next(), revoked]);
        if (item.done) finish();
        return item;
      } catch (err) {
        finish();
        throw err;
      }
    },
    async return() {
      finish();
      await source.return?.();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

type Stop = (result: never) => void;

export function sseAdmission(admission: Admission, sessions: Sessions, apiKeys: ApiKeys) {
  return {
    onSubscribe({ args, setResultAndStopExecution }: { args: ExecutionArgs; setResultAndStopExecution: Stop }) {
      const { tenant, keyId, role, keyName, connection } = args.contextValue as Context;
      if (connection.transport !== 'http') return;
      const refuse = (error: GraphQLError) => setResultAndStopExecution({ errors: [error] } as never);
      const tooFast = admission.setup({ address: connection.address });
      if (tooFast) return refuse(tooFast);
      const connected = admission.connect(tenant);
      if (connected instanceof GraphQLError) return refuse(connected);
      const subscribed = admission.subscribe(tenant);
      if (subscribed instanceof GraphQLError) {
        connected();
        return refuse(subscribed);
      }
      const release = () => {
        connected();
        subscribed();
      };
      return {
        onSubscribeResult({ result, setResult }: { result: unknown; setResult: Stop }) {
          if (!(Symbol.asyncIterator in (result as object))) return release();
          const principal = { tenant, keyId, role, name: keyName };
          setResult(
            revocable(result as AsyncIterableIterator<unknown>, keyId, sessions, release, () => apiKeys.stillValid(principal)) as never,
          );
        },
      };
    },
  };
}
